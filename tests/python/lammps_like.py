"""A LAMMPS-like call tree (tests of call-site merging): LAMMPS_NS::Verlet::run(int) calls
from six sites of one caller, 51.4% down to 1.2% of the time each, 97.0% together, and main
at two sites.  Two ranks with the same tree (rank 1: the same values), format 2.0, with its
symbols.tsv so no symbolizer runs.

  main (lmp.cpp:20)                                       970 ms per rank
    LAMMPS_NS::Run::command(int, char**) (run.cpp:180)
      LAMMPS_NS::Verlet::run(int) (verlet.cpp:120)        514 ms > Pair::compute (fn) 514
      ... (verlet.cpp:130)                                200 ms > Pair::compute (fn) 200
      ... (verlet.cpp:140)                                120 ms > Neighbor::build (fn) 120
      ... (verlet.cpp:150)                                 70 ms > MPI_Allreduce 70 (10 calls, 80 B)
      ... (verlet.cpp:160)                                 54 ms > Pair::compute (fn) 54
      ... (verlet.cpp:170)                                 12 ms > Comm::exchange (fn) 12
  main (lmp.cpp:22)                                        30 ms > Output::write (fn) 30
Sampled leaves: 10 samples per ms.
"""
from pathlib import Path

from pathscope_samples import rank_rows, tsv_text, write_profile

LMP = ("/opt/lammps/bin/lmp", "0011223344556677")
MS = 1_000_000
VERLET = "LAMMPS_NS::Verlet::run(int)"
PAIR = "LAMMPS_NS::PairLJCut::compute(int, int)"
# (parent index, kind, address or MPI name, sample ms, mpi ms, visits, bytes): node 1 on
NODES = [(0, "call", 0x1010, 0, 0, 0, 0),        # 1 main @20
         (1, "call", 0x2010, 0, 0, 0, 0),        # 2 Run::command @180
         (2, "call", 0x3010, 0, 0, 0, 0),        # 3 Verlet::run @120
         (3, "fn", 0x4000, 514, 0, 0, 0),        # 4 Pair::compute
         (2, "call", 0x3020, 0, 0, 0, 0),        # 5 Verlet::run @130
         (5, "fn", 0x4000, 200, 0, 0, 0),
         (2, "call", 0x3030, 0, 0, 0, 0),        # 7 Verlet::run @140
         (7, "fn", 0x5000, 120, 0, 0, 0),        # Neighbor::build
         (2, "call", 0x3040, 0, 0, 0, 0),        # 9 Verlet::run @150
         (9, "mpi", "MPI_Allreduce", 0, 70, 10, 80),
         (2, "call", 0x3050, 0, 0, 0, 0),        # 11 Verlet::run @160
         (11, "fn", 0x4000, 54, 0, 0, 0),
         (2, "call", 0x3060, 0, 0, 0, 0),        # 13 Verlet::run @170
         (13, "fn", 0x6000, 12, 0, 0, 0),        # Comm::exchange
         (0, "call", 0x1020, 0, 0, 0, 0),        # 15 main @22
         (15, "fn", 0x7000, 30, 0, 0, 0)]        # Output::write
SYMBOLS = {0x1010: ("main", "lmp.cpp", 20), 0x1020: ("main", "lmp.cpp", 22),
           0x2010: ("LAMMPS_NS::Run::command(int, char**)", "run.cpp", 180),
           **{0x3010 + 0x10 * i: (VERLET, "verlet.cpp", 120 + 10 * i) for i in range(6)},
           0x4000: (PAIR, "pair_lj_cut.cpp", 50),
           0x5000: ("LAMMPS_NS::Neighbor::build(int)", "neighbor.cpp", 10),
           0x6000: ("LAMMPS_NS::Comm::exchange()", "comm.cpp", 30),
           0x7000: ("LAMMPS_NS::Output::write(long)", "output.cpp", 25)}


def _node_rows():
    rows = [("node", 0, 0, "-", "root", "-", "-", 0, 0, 0, 0, 0)]
    for i, (parent, kind, where, sample, mpi, visits, nbytes) in enumerate(NODES, 1):
        module, address = ("-", where) if kind == "mpi" else (0, f"0x{where:x}")
        rows.append(("node", 0, i, parent, kind, module, address, visits, sample * MS,
                     sample * 10, mpi * MS, nbytes))
    return rows


def write_lammps_like(directory: Path) -> Path:
    extra = [("sampler", "posix-cpu-timer", 10000, "cpu"), ("unwind", "coll", "path"),
             ("module", 0, LMP[0], LMP[1]),
             ("thread", 0, 4200, 1000 * MS, 9700, 10, 0, 0, len(NODES) + 1)] + _node_rows()
    ranks = {r: rank_rows(r, 2, "complete", f"node0{r + 1}", 1000 * MS, 70 * MS,
                          version="2.0", program="lmp", extra=extra) for r in (0, 1)}
    write_profile(directory, None, ranks)
    symbols = [("pathscope-symbols", "2.0"), ("module", 0, LMP[0], LMP[1], "ok")]
    for address, (name, file, line) in sorted(SYMBOLS.items()):
        kind = "fn" if address & 0xfff == 0 else "call"
        symbols.append(("frame", 0, f"0x{address:x}", kind, 0, name, f"/src/lammps/{file}",
                        line))
    symbols.append(("end",))
    (directory / "symbols.tsv").write_text(tsv_text(symbols))
    return directory
