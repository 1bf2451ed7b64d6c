"""What a step defined in the script itself (`__main__`: a script's top
level, a notebook cell) needs from it, by value: the trial never imports
the script again, which would run its training loop.

From the names the step reads, followed through every definition they
reach: the script's own functions and classes as source (written to
step.json with their file and first line, so tracebacks name the user's
lines), the modules it imported (imported again by name), names it
imported from other modules (`from tagger import Tagger`), plain constants
as literals, and any other value (a config object, a table) as data saved
with the step's state. Source, not pickled bytecode: the archive must run
under another Python version. The classes of `__main__` that the saved
objects are instances of (the model's) are found by pickling them once
without their tensors, and written as source too."""
import ast
import inspect
import io
import linecache
import pickle
import symtable
import sys
import textwrap
import types

import torch

_LITERALS = (bool, int, float, complex, str, bytes, type(None))


class StepNotSaved(Exception):
    pass


class ByValue:
    def __init__(self, namespace, main_name):
        self.namespace = namespace   # the script's globals
        self.main = main_name
        self.modules = {}        # alias -> module name
        self.imports = {}        # alias -> [module, qualname]
        self.constants = {}      # name -> repr of a literal
        self.definitions = {}    # name -> {"file", "line", "source"}
        self.data = {}           # name -> value, saved with the step's state
        self._seen = set()

    # ---------------------------------------------------------------- walk
    def add(self, names):
        queue = list(names)
        while queue:
            name = queue.pop()
            if name in self._seen or name not in self.namespace or name.startswith("__"):
                continue
            self._seen.add(name)
            queue.extend(self._take(name, self.namespace[name]))

    def _take(self, name, value):
        """Records one name; returns the names its definition reads."""
        if isinstance(value, types.ModuleType):
            self.modules[name] = value.__name__
            return []
        if inspect.isfunction(value) or inspect.isclass(value):
            module = getattr(value, "__module__", None)
            if module == self.main:
                return self._define(name, value)
            if module and "<locals>" not in getattr(value, "__qualname__", "<locals>") and module in sys.modules:
                self.imports[name] = [module, value.__qualname__]
                return []
        if _is_literal(value):
            self.constants[name] = repr(value)
            return []
        self.data[name] = value
        return []

    def _define(self, name, value):
        # A decorated function is its decorators' wrapper (functools.wraps):
        # its file is theirs, its source the user's (inspect follows
        # __wrapped__ for one and not the other).
        value = inspect.unwrap(value) if inspect.isfunction(value) else value
        found = _class_source(value) if inspect.isclass(value) else None
        if found is None:
            try:
                lines, first = inspect.getsourcelines(value)
                file = inspect.getsourcefile(value) or value.__code__.co_filename
            except (OSError, TypeError) as error:
                raise StepNotSaved("the source of %s, which the step uses, cannot be read (%s): define it in a file "
                                   "or a notebook cell" % (name, error))
            found = (file, first, textwrap.dedent("".join(lines)))
        file, first, source = found
        if inspect.isfunction(value):
            source = _without_capture_decorator(source, self.namespace)
        self.definitions[name] = {"file": file, "line": max(first, 1), "source": source}
        return sorted(_names_read(source))

    def add_classes_of(self, objects):
        """The script's classes and functions the saved objects refer to,
        each object on its own: one that pickle refuses (torch.save reports
        it later, in its own words) hides nothing about the others."""
        found = set()
        for value in _leaves(objects):
            finder = _MainFinder(io.BytesIO(), self.main)
            try:
                finder.dump(value)
            except Exception:
                pass
            found |= finder.found
        self.add(sorted(name.split(".")[0] for name in found))

    # ---------------------------------------------------------------- record
    def meta(self):
        order = list(self.namespace)
        definitions = sorted(self.definitions.items(), key=lambda item: order.index(item[0]))
        return {"modules": self.modules, "imports": self.imports, "constants": self.constants,
                "definitions": [dict(name=name, **d) for name, d in definitions]}


class _MainFinder(pickle.Pickler):
    """Pickles to nowhere, noting every class and function of `main` met;
    tensors and storages are not descended into (their bytes do not matter)."""

    def __init__(self, file, main):
        super().__init__(file, protocol=4)
        self.main = main
        self.found = set()

    def persistent_id(self, obj):
        if isinstance(obj, torch.Tensor) or type(obj).__name__ in ("UntypedStorage", "TypedStorage"):
            return id(obj)
        return None

    def reducer_override(self, obj):
        kind = obj if isinstance(obj, type) else type(obj)
        if getattr(kind, "__module__", None) == self.main:
            self.found.add(kind.__qualname__)
        if isinstance(obj, types.FunctionType) and obj.__module__ == self.main:
            self.found.add(obj.__qualname__)
        return NotImplemented


def _leaves(objects):
    """The values of the state's groups (args, kwargs, variables, globals, ...)."""
    for group in objects.values() if isinstance(objects, dict) else [objects]:
        if isinstance(group, dict):
            yield from group.values()
        elif isinstance(group, (list, tuple)):
            yield from group
        else:
            yield group


def _class_source(cls):
    """(file, first line, source) of a class, found through its methods'
    code: inspect looks a class up by its module's __file__, which a
    notebook's __main__ does not have (or names another file). None when
    the class has no method of its own to go by."""
    for member in vars(cls).values():
        member = getattr(member, "__func__", getattr(member, "fget", member))
        code = getattr(member, "__code__", None)
        if code is None:
            continue
        lines = linecache.getlines(code.co_filename)
        try:
            tree = ast.parse("".join(lines))
        except SyntaxError:
            return None
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == cls.__name__ and \
                    node.lineno <= code.co_firstlineno <= node.end_lineno:
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                return code.co_filename, first, textwrap.dedent("".join(lines[first - 1:node.end_lineno]))
        return None
    return None


def _without_capture_decorator(source, namespace):
    """A function's source without minrepro_capture's own decorator
    (`@minrepro_capture.capture(...)`, or `@deco` after `deco =
    capture(...)`): the trial calls the step itself, and `deco` is nothing
    the step needs (the trial had no such name: NameError). Its lines are
    left blank, so that the lines below keep their numbers in tracebacks."""
    from . import capture
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    if not tree.body or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return source
    lines = source.splitlines(keepends=True)
    for decorator in tree.body[0].decorator_list:
        target = _resolve(decorator.func if isinstance(decorator, ast.Call) else decorator, namespace)
        if target is capture or isinstance(target, capture):
            for i in range(decorator.lineno - 1, decorator.end_lineno):
                lines[i] = "\n"
    return "".join(lines)


def _resolve(expr, namespace):
    """What a decorator's name or dotted name is in the script, looked up
    without running any code of the objects it passes (no property)."""
    if isinstance(expr, ast.Name):
        return namespace.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _resolve(expr.value, namespace)
        try:
            return inspect.getattr_static(base, expr.attr) if base is not None else None
        except AttributeError:
            return None
    return None


def _is_literal(value):
    if isinstance(value, _LITERALS):
        return True
    if isinstance(value, (tuple, list, frozenset, set)):
        return all(_is_literal(v) for v in value)
    if isinstance(value, dict):
        return all(_is_literal(k) and _is_literal(v) for k, v in value.items())
    return False


def _names_read(source):
    """The names a definition reads from the script's globals: the module
    level's (decorators, bases, defaults, annotations) and each scope's
    globals, not its own locals. A function's `with open(p) as f` is not
    the script's `f` (the file a top-level `with open(...) as f` left
    there, which pickle refuses, and the step never reads)."""
    try:
        table = symtable.symtable(source, "<definition>", "exec")
    except SyntaxError:
        return set()
    names = set()

    def walk(scope):
        kind = scope.get_type()
        for symbol in scope.get_symbols():
            if not symbol.is_referenced():
                continue
            if kind == "module" or symbol.is_global() or (
                    kind == "class" and not symbol.is_assigned() and not symbol.is_free()):
                names.add(symbol.get_name())
        for child in scope.get_children():
            walk(child)

    walk(table)
    return names


def source_lines(filename):
    """The lines of a script or a notebook cell (IPython keeps cells in linecache)."""
    lines = linecache.getlines(filename)
    if not lines:
        raise StepNotSaved("the source of %s cannot be read: run the step from a file or a notebook cell" % filename)
    return lines
