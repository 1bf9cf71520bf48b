"""envmgr: declarative environment and upgrade manager for GPU inference hosts."""

__version__ = "0.1.0"
