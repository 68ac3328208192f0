"""``python -m onceover_backend serve|db|token``: the control plane's own commands."""

from onceover_backend.commands import main

if __name__ == "__main__":
    main()
