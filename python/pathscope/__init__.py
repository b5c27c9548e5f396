"""pathscope: analysis of MPI profiles written by the pathscope runtime (docs/format.md).

The reader (pathscope.reader.load_profile) is the entry point for programs; the command line
is pathscope.cli (run as `pathscope` or `python -m pathscope`); `pathscope.open(DIR)` gives a
profile as pandas DataFrames (pathscope.frames: imported on first use, so that `pathscope run`
never loads pandas)."""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "open":
        from pathscope.frames import open as open_profile
        return open_profile
    raise AttributeError(f"module 'pathscope' has no attribute '{name}'")
