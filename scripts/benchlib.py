"""Shared by the bench scripts and their smoke tests: load a script of scripts/ (a Python file
without the .py suffix, such as bench-peers) as a module, to reuse its shapes, builds, foreign-load
guard and llama.cpp driver."""
import importlib.machinery
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def load_script(name):
    """scripts/NAME as a module named NAME with '-' as '_'."""
    module = name.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(module, os.path.join(HERE, name))
    spec = importlib.util.spec_from_loader(module, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod
