"""TEST DOUBLE entry point: ``python -m sglang.launch_server --model-path M [flags]``."""

from sglang._double_server import main

if __name__ == "__main__":
    main()
