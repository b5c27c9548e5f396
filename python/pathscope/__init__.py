"""pathscope: analysis of MPI profiles written by the pathscope runtime (docs/format.md).

The reader (pathscope.reader.load_profile) is the entry point for programs; the command line
is pathscope.cli (run as `pathscope` or `python -m pathscope`)."""

__version__ = "0.1.0"
