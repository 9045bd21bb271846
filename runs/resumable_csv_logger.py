"""``ResumableCSVLogger``: Lightning's ``CSVLogger`` keeping a resumed run's rows (its writer deletes ``metrics.csv``).

At its first save it drops only the rows at or after the first step it logs (logged again); a fresh run starts at
step 0 and so replaces an old file.
"""

from __future__ import annotations

import csv
from typing import Any

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from sts_lightning.runs.compat import KeepsCSVFile, csv_experiment


class _ResumableWriter(KeepsCSVFile, ExperimentWriter):
    def __init__(self, log_dir: str) -> None:
        self._trimmed = False
        super().__init__(log_dir)

    def save(self) -> None:
        if self.metrics and not self._trimmed:
            self._trimmed = True
            self._keep_rows_before(min(int(m["step"]) for m in self.metrics))
        super().save()

    def _keep_rows_before(self, step: int) -> None:
        if not self.fs.isfile(self.metrics_file_path):
            return
        with self.fs.open(self.metrics_file_path, "r", newline="") as f:
            rows: list[dict[str, Any]] = [r for r in csv.DictReader(f) if int(r["step"]) < step]
        # The header of the kept rows only (a column only a dropped row filled comes back if logged again).
        self.metrics_keys = sorted({k for r in rows for k, v in r.items() if v != ""} | ({"step"} if rows else set()))
        if not rows:
            self.fs.rm_file(self.metrics_file_path)
            return
        with self.fs.open(self.metrics_file_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.metrics_keys, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)


class ResumableCSVLogger(CSVLogger):
    """``CSVLogger`` whose ``metrics.csv`` survives a resume in the same directory."""

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        return csv_experiment(self, _ResumableWriter)  # as CSVLogger.experiment, with the writer above
