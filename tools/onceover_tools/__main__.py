"""``python -m onceover_tools`` and the ``onceover`` console script.

Kept free of newer syntax so that an old Python reaches the version check and
prints one line instead of a SyntaxError from deeper modules.
"""

import sys


def main() -> None:
    from onceover.errors import PreflightError
    from onceover.preflight import check_python

    try:
        check_python()
    except PreflightError as exc:
        print(f"onceover: {exc}", file=sys.stderr)
        sys.exit(2)
    from onceover_tools.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
