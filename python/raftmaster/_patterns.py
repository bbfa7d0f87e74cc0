"""The warning of a set_dataset whose patterns lost to the job's dataset."""

from __future__ import annotations

import logging
from typing import Sequence


def same_patterns(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether a and b hold the same patterns, in any order: the leader
    indexes the files they match sorted and without duplicates, so the
    order of the patterns changes nothing."""
    return set(a) == set(b)


def warn_other_patterns(log: logging.Logger, job: str, requested: Sequence[str], ignored: bool,
                        current: Sequence[str]) -> None:
    """Log a warning when an ignored set_dataset asked for other patterns
    than those the job's dataset was set with: the job reads the files of
    those, and the call changed nothing. A cluster that does not know the
    dataset's patterns (one below protocol level 4, or a dataset given as
    chunks) answers none, and nothing is logged."""
    if not ignored or not current or same_patterns(requested, current):
        return
    log.warning("the dataset of job %s was set with other patterns; the job reads those files, and this "
                "set_dataset changed nothing: requested %s, current %s", job, list(requested), list(current))
