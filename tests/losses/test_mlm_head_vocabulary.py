"""A saved MLM head loads into a model whose vocabulary grew after it was saved (CLEAR's [DEL], added by
training before the head is built): CLEAR from a `cselab pretrain` encoder or from bert-base-uncased."""
import torch

from cselab.model.encoder import SentenceEncoder
from cselab.model.mlm_head import MlmHead


def test_a_head_saved_before_tokens_were_added_loads_its_rows_and_initialises_the_new_ones(tiny_encoder, tmp_path):
    head = MlmHead(tiny_encoder.backbone)
    torch.nn.init.normal_(head.head.predictions.bias)
    tiny_encoder.mlm_head = head
    tiny_encoder.save(tmp_path / "raw")  # a raw encoder's directory, as `cselab pretrain` writes it
    saved_bias = head.head.predictions.bias.detach().clone()

    grown = SentenceEncoder.from_pretrained(str(tmp_path / "raw"), pooler="cls")
    assert grown.add_special_tokens(["[DEL]"]) == ["[DEL]"]
    again = MlmHead(grown.backbone)
    initialised = again.head.predictions.bias.detach().clone()
    assert again.load_from(str(tmp_path / "raw"))
    bias = again.head.predictions.bias
    assert bias.shape[0] == saved_bias.shape[0] + 1 == len(grown.tokenizer)
    assert torch.equal(bias[:-1], saved_bias)  # the saved rows
    assert torch.equal(bias[-1:], initialised[-1:])  # [DEL]'s row: the architecture's initialisation
    assert again.head.predictions.decoder.weight is grown.input_embeddings()
    dense = "predictions.transform.dense.weight"
    assert torch.equal(again.head.state_dict()[dense], head.head.state_dict()[dense])
