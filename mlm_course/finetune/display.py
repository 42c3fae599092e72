"""What notebook 07 shows besides figures: which model to fine-tune offline, and the comparison as a text table."""

from __future__ import annotations

from collections.abc import Sequence

from mlm_course import models
from mlm_course.finetune.classifier import RANDOM_PREFIX


def first_available(names: Sequence[str] = ("minilm", "course", "random:tiny")) -> str:
    """The first of ``names`` that loads offline on this machine (MiniLM needs its package, "course" the checkpoint)."""
    for name in names:
        arch = name[len(RANDOM_PREFIX):] if name.startswith(RANDOM_PREFIX) else name
        if arch in models.CONFIGS:
            return name
        try:
            models.resolve(arch, allow_hub=False)
        except (FileNotFoundError, ConnectionError):
            continue
        return name
    raise FileNotFoundError(f"none of {list(names)} is available offline: add 'random:tiny', which always is")


def comparison_table(rows: Sequence[dict], *, hardware: bool = True) -> str:
    """The comparison as aligned text: model, test accuracy, test F1, dev accuracy, training time and (with
    ``hardware``) where and when each run trained."""
    def pct(split, row):
        return f"{row[split]['accuracy']:.1%}" if row.get(split) else "—"

    lines = [f"{'model':<55} {'test acc':>8} {'test F1':>8} {'dev acc':>8} {'train s':>8}" + ("  hardware" * hardware)]
    for row in rows:
        if row.get("test") is None:
            lines.append(f"{row['label']:<55} {row['status']}")
            continue
        hw = row.get("hardware") or {}
        where = hw.get("gpu") or f"{hw.get('cpus')}-core CPU ({hw.get('torch_threads', '?')} thread(s))"
        star = "*" if row.get("note") else " "
        line = (f"{row['label']:<55} {pct('test', row):>8} {row['test']['f1']:>8.3f} {pct('dev', row):>8} "
                f"{row['train_seconds']:>8.0f}{star}")
        lines.append(f"{line} {where}, {row.get('date', '')}" if hardware else line.rstrip())
    lines += [f"* {row['label']}: {row['note']}" for row in rows if row.get("note")]
    return "\n".join(lines)
