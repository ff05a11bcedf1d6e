"""numba's on-disk cache keys a compiled function on its own source file only: one that calls a
compiled function of another module would keep running the old callee after that module
changed (seen here: a stale, four times slower Viterbi). So no compiled function calls one of
another module; this test holds that."""

import importlib
import pkgutil

from numba.core.caching import NullCache
from numba.core.registry import CPUDispatcher

import tokenmill


def compiled_functions():
    for info in pkgutil.walk_packages(tokenmill.__path__, "tokenmill."):
        if info.name == "tokenmill.__main__":
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__:
                yield module, name, value


def test_compiled_functions_call_only_their_own_module():
    found = list(compiled_functions())
    assert len(found) >= 10
    for module, name, dispatcher in found:
        for used in dispatcher.py_func.__code__.co_names:
            target = dispatcher.py_func.__globals__.get(used)
            if isinstance(target, CPUDispatcher):
                assert target.py_func.__module__ == module.__name__, f"{module.__name__}.{name} calls {used}"


def test_compiled_functions_cache_and_release_the_gil():
    for module, name, dispatcher in compiled_functions():
        assert not isinstance(dispatcher._cache, NullCache), f"{module.__name__}.{name} is not cached"
        assert dispatcher.targetoptions.get("nogil"), f"{module.__name__}.{name}"
