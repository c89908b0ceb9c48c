"""Loss tests use tiny tensors: one thread avoids oversubscribing a shared 2-core machine."""
import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
