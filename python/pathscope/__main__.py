"""`python -m pathscope`: the command line."""
from pathscope.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
