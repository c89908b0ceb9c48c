from cselab.model.encoder import SentenceEncoder
from cselab.model.poolers import POOLERS
from cselab.sources import resolve_model_path

__all__ = ["POOLERS", "SentenceEncoder", "resolve_model_path"]
