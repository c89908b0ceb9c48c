"""The BibTeX entry of each paper whose method cselab implements, once each.

Loss terms and augmenters carry the entry of their method in a ``citation`` class attribute (""
where no paper defines it); a saved model's card (``model/card.py``) lists those of the run.
"""
from __future__ import annotations

SIMCSE = """@inproceedings{gao2021simcse,
  title = {{SimCSE}: Simple Contrastive Learning of Sentence Embeddings},
  author = {Gao, Tianyu and Yao, Xingcheng and Chen, Danqi},
  booktitle = {Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing},
  year = {2021}
}"""

CLEAR = """@article{wu2020clear,
  title = {{CLEAR}: Contrastive Learning for Sentence Representation},
  author = {Wu, Zhuofeng and Wang, Sinong and Gu, Jiatao and Khabsa, Madian and Sun, Fei and Ma, Hao},
  journal = {arXiv preprint arXiv:2012.15466},
  year = {2020}
}"""

FOCAL_INFONCE = """@inproceedings{hou2023focal,
  title = {Improving Contrastive Learning of Sentence Embeddings with Focal-{InfoNCE}},
  author = {Hou, Pengyue and Li, Xingyu},
  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2023},
  year = {2023}
}"""

AUGCSE = """@article{tang2022augcse,
  title = {{AugCSE}: Contrastive Sentence Embedding with Diverse Augmentations},
  author = {Tang, Zilu and Kocyigit, Muhammed Yusuf and Wijaya, Derry},
  journal = {arXiv preprint arXiv:2210.13749},
  year = {2022}
}"""

SDA = """@article{mao2022sda,
  title = {{SDA}: Simple Discrete Augmentation for Contrastive Sentence Representation Learning},
  author = {Mao, Zhenyu and Zhu, Dongsheng and Lu, Jinghui and Zhao, Rui and Tan, Fei},
  journal = {arXiv preprint arXiv:2210.03963},
  year = {2022}
}"""

DIFFCSE = """@inproceedings{chuang2022diffcse,
  title = {{DiffCSE}: Difference-based Contrastive Learning for Sentence Embeddings},
  author = {Chuang, Yung-Sung and Dangovski, Rumen and Luo, Hongyin and Zhang, Yang and Chang, Shiyu and
            Soljacic, Marin and Li, Shang-Wen and Yih, Wen-tau and Kim, Yoon and Glass, James},
  booktitle = {Proceedings of the 2022 Conference of the North American Chapter of the Association for
               Computational Linguistics: Human Language Technologies},
  year = {2022}
}"""

UNA = """@article{shu2024una,
  title = {Unsupervised hard Negative Augmentation for contrastive learning},
  author = {Shu, Yuxuan and Lampos, Vasileios},
  journal = {arXiv preprint arXiv:2401.02594},
  year = {2024}
}"""

# COLING 2022 (pages 3898-3907); the authors' README still cites the arXiv preprint 2109.04380 (2021).
ESIMCSE = """@inproceedings{wu2022esimcse,
  title = {{ESimCSE}: Enhanced Sample Building Method for Contrastive Learning of Unsupervised Sentence Embedding},
  author = {Wu, Xing and Gao, Chaochen and Zang, Liangjun and Han, Jizhong and Wang, Zhongyuan and Hu, Songlin},
  booktitle = {Proceedings of the 29th International Conference on Computational Linguistics},
  year = {2022}
}"""

EDA = """@inproceedings{wei2019eda,
  title = {{EDA}: Easy Data Augmentation Techniques for Boosting Performance on Text Classification Tasks},
  author = {Wei, Jason and Zou, Kai},
  booktitle = {Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing and the
               9th International Joint Conference on Natural Language Processing (EMNLP-IJCNLP)},
  year = {2019}
}"""

BERT = """@inproceedings{devlin2019bert,
  title = {{BERT}: Pre-training of Deep Bidirectional Transformers for Language Understanding},
  author = {Devlin, Jacob and Chang, Ming-Wei and Lee, Kenton and Toutanova, Kristina},
  booktitle = {Proceedings of the 2019 Conference of the North American Chapter of the Association for
               Computational Linguistics: Human Language Technologies},
  year = {2019}
}"""

SENTENCE_BERT = """@inproceedings{reimers2019sentencebert,
  title = {Sentence-{BERT}: Sentence Embeddings using Siamese {BERT}-Networks},
  author = {Reimers, Nils and Gurevych, Iryna},
  booktitle = {Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing},
  year = {2019}
}"""


def join(*entries: str) -> str:
    """The distinct non-empty entries, first-seen order, a blank line apart (a composed augmenter's,
    or a run's, ``citation``)."""
    return "\n\n".join(dict.fromkeys(e.strip() for e in entries if e and e.strip()))


def entries(citation: str) -> list[str]:
    """The single entries of a ``join``-ed citation."""
    return [part.strip() for part in citation.split("\n\n") if part.strip()]


def collect(parts, dropout_view: bool) -> str:
    """The citation of a run: each objective term's and augmenter's (both have a ``citation``; None: a
    role with no augmenter), and SimCSE's where a view is a dropout view (SimCSE's positives)."""
    return join(SIMCSE if dropout_view else "", *(part.citation for part in parts if part is not None))
