"""`python -m kernels.cpu`: build the native CPU kernels ahead of time (scripts/setup.sh runs it)."""

from kernels.cpu.build import native_ops

if __name__ == "__main__":
    ready = native_ops() is not None
    print("native CPU kernels:", "ready" if ready else "unavailable (the torch reference kernels will run)")
