"""One STS-B dev figure per model, the precision it was computed in, and the base model's row.

A trained run has two STS-B dev figures for the model it kept: the training loop's (summary.json
``best_stsb_dev``: the score that selected the model, computed in the training precision with
sentences cut to the recipe's ``max_seq_len``) and the final evaluation's (eval-dev.json: the saved
model encoded again, in the precision and length it records; ``cselab sweep`` uses fp32 and the
model's full length). Same weights and sentences, so they differ only by precision and truncation.
The report shows the final figure where there is one and says what the other is and how far apart
the two were on these runs. The base model's score before training (summary.json
``base_stsb_dev``) was computed by the training loop, in the in-training settings.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cselab.errors import counted
from cselab.experiments.runs import Run
from cselab.experiments.stats import Cell, Column, ReferenceRow, Table, mark_best, number, recipe_order

STSB = "STSBenchmark"  # the task name in eval-<split>.json
DEV_TABLE = "stsb_dev"


@dataclass(frozen=True)
class Setting:
    """How an STS-B dev figure was computed: the precision and the token limit of the encoding."""

    precision: str | None
    max_seq_len: int | None

    def describe(self) -> str:
        precision = self.precision or "precision not recorded"
        return precision if self.max_seq_len is None else f"{precision}, up to {self.max_seq_len} tokens"


@dataclass
class DevFigure:
    value: float
    setting: Setting
    final: bool  # True: the final evaluation (eval-dev.json); False: the training loop's selection score

    @property
    def source(self) -> str:
        return "final" if self.final else "in training"


@dataclass
class BaseModel:
    """The encoder some runs started from, with its STS-B dev score before training (one per run)."""

    model: str
    pooler: str
    setting: Setting  # the in-training settings it was scored in
    values: dict[str, float] = field(default_factory=dict)  # "recipe seed S" -> score
    recipes: list[str] = field(default_factory=list)


def _integer(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def training_precision(summary: dict | None) -> str | None:
    """The precision summary.json records training ran in (hardware.PrecisionChoice's dict, or a bare name)."""
    recorded = (summary or {}).get("precision")
    precision = recorded.get("precision") if isinstance(recorded, dict) else recorded
    return precision if isinstance(precision, str) else None


def training_setting(run: Run) -> Setting:
    """The training precision and the recipe's token limit: how the training loop scored STS-B dev."""
    return Setting(training_precision(run.summary), _integer((run.config.get("model") or {}).get("max_seq_len")))


def final_setting(run: Run) -> Setting:
    result = run.evals.get("dev") or {}
    precision = result.get("precision")
    return Setting(precision if isinstance(precision, str) else None, _integer(result.get("max_seq_len")))


def final_dev(run: Run) -> float | None:
    return number(((run.evals.get("dev") or {}).get("tasks", {}).get(STSB) or {}).get("score"))


def selection_dev(run: Run) -> float | None:
    return number((run.summary or {}).get("best_stsb_dev"))


def base_dev(run: Run) -> float | None:
    return number((run.summary or {}).get("base_stsb_dev"))


def dev_figure(run: Run) -> DevFigure | None:
    """The run's one STS-B dev figure: the final evaluation where there is one, else the selection score."""
    final = final_dev(run)
    if final is not None:
        return DevFigure(final, final_setting(run), final=True)
    selected = selection_dev(run)
    return None if selected is None else DevFigure(selected, training_setting(run), final=False)


def base_model_name(run: Run) -> str:
    model = run.config.get("model") or {}
    name = str(model.get("name_or_path", "unknown"))
    # model.from_config builds a fresh encoder; the name then only supplies the tokenizer, unless a
    # WordPiece vocabulary is trained on the corpus (model.wordpiece_vocab_size).
    if not model.get("from_config"):
        return name
    size = model.get("wordpiece_vocab_size")
    vocabulary = f"a WordPiece vocabulary of {size} pieces from the corpus" if size else f"{name}'s tokenizer"
    return f"randomly initialised encoder ({vocabulary})"


def base_models(runs: list[Run]) -> list[BaseModel]:
    """The base models the runs recorded a score for, one per (model, pooler, in-training settings)."""
    groups: dict[tuple, BaseModel] = {}
    for run in runs:
        value = base_dev(run)
        if value is None:
            continue
        pooler = str((run.config.get("model") or {}).get("pooler", "unknown"))
        key = (base_model_name(run), pooler, training_setting(run))
        group = groups.setdefault(key, BaseModel(*key))
        group.values[f"{run.recipe} seed {run.seed}"] = value
        if run.recipe not in group.recipes:
            group.recipes.append(run.recipe)
    return list(groups.values())


def base_label(base: BaseModel, several: bool) -> str:
    label = f"base model: {base.model}, before training"
    if several:  # say what tells the rows apart
        label += f" (pooler {base.pooler}, {base.setting.max_seq_len} tokens)"
    return label


def base_rows(runs: list[Run], column_key: str) -> list[ReferenceRow]:
    """A row per base model. Runs that recorded the same value share one measurement (a sweep measures the
    base once and gives it to the later runs): it is counted once, with no spread over seeds it never had."""
    bases = base_models(runs)
    return [ReferenceRow(base_label(b, len(bases) > 1), f"{b.setting.precision or 'not recorded'} (in training)",
                         {column_key: Cell(dict(enumerate(dict.fromkeys(b.values.values()))))}, list(b.recipes),
                         runs=len(b.values)) for b in bases]


def _settings(settings: set[Setting]) -> str:
    return "; ".join(sorted(s.describe() for s in settings)) or "not recorded"


def selection_gap(runs: list[Run]) -> list[float]:
    """Final minus in-training STS-B dev of the same kept model, per run that has both."""
    return [final_dev(r) - selection_dev(r) for r in runs
            if final_dev(r) is not None and selection_dev(r) is not None]


def gap_sentence(gap: list[float]) -> str:
    if len(gap) == 1:
        return f"final minus in-training was {gap[0]:+.2f} (1 run)"
    return (f"final minus in-training was {np.mean(gap):+.2f} on average "
            f"({min(gap):+.2f} to {max(gap):+.2f} over {counted(len(gap), 'run')})")


def final_note(runs: list[Run]) -> str | None:
    """What the tabulated STS-B dev figure is, what the untabulated one is, and how far apart they were."""
    finals = [r for r in runs if final_dev(r) is not None]
    if not finals:
        return None
    final_settings = {final_setting(r) for r in finals}
    note = (f"STS-B (dev) is one figure per model: the final evaluation of the model each run kept "
            f"(eval-dev.json; {_settings(final_settings)}).")
    selected = [r for r in runs if selection_dev(r) is not None]
    if selected:
        training_settings = {training_setting(r) for r in selected}
        note += (f" Training kept that model for its in-training STS-B dev score ({_settings(training_settings)}; "
                 "summary.json's best_stsb_dev, the STS-B dev curves below), which no table repeats.")
        gap = selection_gap(runs)
        if gap and training_settings == final_settings:
            note += (" Same weights, sentences, precision and length, so the two should agree: "
                     + gap_sentence(gap) + ".")
        elif gap:
            note += (" Same weights and sentences, so the two differ in precision and truncation only: "
                     + gap_sentence(gap) + ".")
    return note


def base_note(runs: list[Run], finals_shown: bool) -> str:
    bases = base_models(runs)
    if not bases:
        return ("No base-model row: no run's summary.json has base_stsb_dev (the score before training, recorded "
                "by runs trained with STS-B dev data since cselab records it).")
    settings = _settings({b.setting for b in bases})
    note = (f"The base-model row is the encoder the runs started from, scored by the training loop before step 1 "
            f"(summary.json's base_stsb_dev) in the in-training settings ({settings}); it was not evaluated on the "
            "other tasks.")
    if finals_shown:
        note += (" Set it against the final figures with the gap between the two settings in mind; like for like, "
                 "the STS-B dev curves show it as a dashed line.")
    else:
        note += " The recipes' in-training figures were computed the same way: like for like."
    if len(bases) > 1:
        note += " " + " ".join(f"{base_label(b, True)}: {', '.join(b.recipes)}." for b in bases)
    return note


def add_base_rows(table: Table, runs: list[Run]) -> None:
    """The base model's row and the notes saying what the table's STS-B dev figures are."""
    table.reference_rows += base_rows(runs, STSB)
    table.notes += [n for n in (final_note(runs), base_note(runs, any(final_dev(r) is not None for r in runs))) if n]


def recipe_figures(runs: list[Run]) -> dict[int, DevFigure]:
    """One recipe's figures from one source: the final evaluation when every run has it, else the in-training
    score of every run (a mean never mixes the two settings)."""
    finals = {r.seed: final_dev(r) for r in runs}
    if finals and all(v is not None for v in finals.values()):
        return {r.seed: DevFigure(finals[r.seed], final_setting(r), final=True) for r in runs}
    return {r.seed: DevFigure(v, training_setting(r), final=False) for r in runs
            for v in [selection_dev(r)] if v is not None}


def dev_table(runs: list[Run], baseline: str | None) -> Table | None:
    """STS-B dev per model where the results tables have no STS-B dev column (test split, or nothing evaluated)."""
    figures = {recipe: recipe_figures([r for r in runs if r.recipe == recipe])
               for recipe in recipe_order(runs, baseline)}
    figures = {recipe: found for recipe, found in figures.items() if found}
    bases = base_rows(runs, DEV_TABLE)
    if not figures and not bases:
        return None
    cells = {(recipe, DEV_TABLE): Cell({seed: f.value for seed, f in found.items()})
             for recipe, found in figures.items()}
    precision = {recipe: ", ".join(sorted({f"{f.setting.precision or 'not recorded'} ({f.source})"
                                           for f in found.values()}))
                 for recipe, found in figures.items()}
    table = Table(DEV_TABLE, "STS-B dev: one figure per model, Spearman x100 (mean ± std over seeds); the "
                  "Precision column says how each was computed",
                  [Column(DEV_TABLE, "STS-B (dev)", lambda _: None)], list(figures), cells,
                  precision=precision, reference_rows=bases)
    mark_best(table)
    shown_final = {recipe for recipe, found in figures.items() if all(f.final for f in found.values())}
    if any(final_dev(r) is not None for r in runs if r.recipe in set(figures) - shown_final):
        table.notes.append("A recipe some of whose runs lack eval-dev.json shows the in-training score of all its "
                           "runs (Precision: in training), so that no mean mixes the two settings.")
    table.notes += [(final_note([r for r in runs if r.recipe in shown_final])
                     or "STS-B (dev) is each run's in-training score of the model it kept (summary.json's "
                        "best_stsb_dev), in the settings the Precision column names."),
                    base_note(runs, bool(shown_final))]
    return table
