"""`python -m tfpipe` is the same CLI as the `tfpipe` console script."""

from tfpipe.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
