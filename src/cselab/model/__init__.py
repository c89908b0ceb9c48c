from cselab.model.encoder import POOLERS, SentenceEncoder, resolve_model_path

__all__ = ["POOLERS", "SentenceEncoder", "resolve_model_path"]
