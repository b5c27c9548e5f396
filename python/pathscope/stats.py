"""One value over the P ranks of a run: the statistics both kinds of call tree give.

    Stats.of_ranks({0: 5, 2: 5}, range(4))   # from per-rank values (the rank files' trees)
    treefile.parse_stats(...)                  # from tree.tsv (the tree reduced in the job)
    stats.mean                                # sum / P

Rules kept here (docs/format.md, "tree.tsv (format 2.9)" and "Merge rules"):
- The population is every rank of the tree: a rank without a value counts as 0, so the mean
  is SUM / P and the minimum is 0 as soon as one rank has nothing.
- Minimum and maximum name their rank, the lowest one on ties.
- The sketch counts the ranks by magnitude: bin K >= 1 holds 2^(K-1) <= v < 2^K, i.e. bin
  v.bit_length(); the ranks with 0 are not listed (they are P - nonzero).
- A value made of several values per rank (two nodes' sums, a difference of subtrees) has an
  exact sum, but its extremes, nonzero count and sketch can only come from per-rank values:
  a reduced tree gives such a value with those fields None (`known` False), never a guess.
Nothing here prints or exits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

SKETCH_BINS = 64              # bins 1..64: every value of 64 bits has its bin
Sketch = tuple[tuple[int, int], ...]   # (bin, ranks) for the bins that are not empty, by bin


@dataclass(frozen=True, slots=True)
class Stats:
    sum: int
    ranks: int                    # P, the population
    min: Optional[int] = None     # None: not known (a value combined from several)
    min_rank: Optional[int] = None
    max: Optional[int] = None
    max_rank: Optional[int] = None
    nonzero: Optional[int] = None
    sketch: Optional[Sketch] = None

    @property
    def total(self) -> int:
        return self.sum

    @property
    def mean(self) -> float:
        return self.sum / self.ranks if self.ranks else 0.0

    @property
    def known(self) -> bool:
        """True when the per-rank fields are known (not only the sum)."""
        return self.min is not None

    @staticmethod
    def zero(ranks: int) -> "Stats":
        """Nothing on any rank."""
        return Stats(0, ranks, 0, 0, 0, 0, 0, ())

    @staticmethod
    def of_ranks(values: Mapping[int, int], ranks: Iterable[int]) -> "Stats":
        """From per-rank values; ranks is the population (a rank of it without a value counts
        as 0, a value of a rank outside it is not counted)."""
        population = sorted(ranks)
        if not population:
            return Stats(0, 0, 0, 0, 0, 0, 0, ())
        low = high = None
        low_rank = high_rank = population[0]
        total = nonzero = 0
        bins: dict[int, int] = {}
        for r in population:            # ascending: strict comparisons keep the lowest rank
            v = values.get(r, 0)
            total += v
            if low is None or v < low:
                low, low_rank = v, r
            if high is None or v > high:
                high, high_rank = v, r
            if v:
                nonzero += 1
                k = v.bit_length()
                bins[k] = bins.get(k, 0) + 1
        return Stats(total, len(population), low, low_rank, high, high_rank, nonzero,
                     tuple(sorted(bins.items())))

    @staticmethod
    def of_vector(values: Sequence[int]) -> "Stats":
        """From each rank's value, rank 0 first (every rank is of the population)."""
        return Stats.of_ranks(dict(enumerate(values)), range(len(values)))

    @staticmethod
    def combine(parts: Iterable["Stats"], ranks: int) -> "Stats":
        """The statistics of a per-rank sum of values known only by their statistics: exact
        when at most one of them is not 0 on every rank, else the sum alone."""
        present = [p for p in parts if p.sum or (p.max or 0)]
        if not present:
            return Stats.zero(ranks)
        if len(present) == 1:
            return present[0]
        return Stats(sum(p.sum for p in present), ranks)

    def minus(self, other: "Stats") -> "Stats":
        """self - other per rank, where other is part of self on every rank: exact when other
        is 0 everywhere, or when the sums are equal (then every rank's difference is 0), else
        the difference of the sums alone."""
        if not other.sum:
            return self
        if self.sum == other.sum:
            return Stats.zero(self.ranks)
        return Stats(self.sum - other.sum, self.ranks)

    def text(self) -> str:
        """As tree.tsv writes it (a known value; format 2.14): `=V` when every rank has V, else
        SUM,MIN,MIN_RANK,MAX,MAX_RANK,NONZERO,BINS with NONZERO left out when it is every rank
        and BINS the bins below MAX's, each `K:COUNT`, or COUNT alone for the bin one above the
        one before (before the first: MIN's bin when MIN > 0)."""
        if self.min == self.max:
            return f"={self.min}"
        before = self.min.bit_length() - 1 if self.min else None
        bins = []
        for k, n in (self.sketch or ())[:-1]:
            bins.append(f"{n}" if before is not None and k == before + 1 else f"{k}:{n}")
            before = k
        nonzero = "" if self.nonzero == self.ranks else f"{self.nonzero}"
        return (f"{self.sum},{self.min},{self.min_rank},{self.max},{self.max_rank},"
                f"{nonzero},{';'.join(bins)}")
