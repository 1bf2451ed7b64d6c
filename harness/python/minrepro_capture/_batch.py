"""The batch as the step was given it, saved so that minrepro can cut it and
the step can run on any cut of it unchanged.

batch.pt holds the same nesting of dicts, lists and tuples with the tensors
detached and on the CPU (minrepro reads any such nesting and writes its
candidates back the same way, harness/batch_tree.h). What torch.load with
weights_only=True does not take is recorded beside it for the trial to put
back (captured_step.py): a named tuple is saved as a plain tuple and a
mapping of another class (a tokenizer's BatchEncoding) as a dict, their
classes recorded by path; a leaf that is neither a tensor nor a number, a
string or None (a PIL image, an object of the user's) is saved as None and
kept in the step's state; each tensor's device is recorded by path, list
indices written "*" (a cut list keeps the entries of its samples). Paths
are JSON lists of keys and indices."""
import collections.abc
import json

import torch

_PLAIN = (bool, int, float, str, type(None))


def _is_namedtuple(value):
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _plain_lists(value):
    """The lists of the batch that hold strings, or lists of strings: file
    names, utterance ids, each sentence's words, one entry per sample."""
    def plain(entry):
        return isinstance(entry, (str, bytes)) or (
            isinstance(entry, list) and all(isinstance(v, (str, bytes)) for v in entry))
    if isinstance(value, collections.abc.Mapping):
        for v in value.values():
            yield from _plain_lists(v)
    elif isinstance(value, (list, tuple)):
        if value and all(plain(v) for v in value):
            yield value
        else:
            for v in value:
                yield from _plain_lists(v)


def _is_record_list(value):
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(entry, collections.abc.Mapping) for entry in value)


def _record_lists(value, path):
    """(path, list) of each list of per-sample records (dicts) in the batch."""
    if _is_record_list(value):
        yield path, value
    elif isinstance(value, collections.abc.Mapping):
        for k, v in value.items():
            yield from _record_lists(v, path + [k])
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _record_lists(v, path + [i])


class SavedBatch:
    def __init__(self, batch, sample_ids, problems):
        self.given = batch
        self.devices = {}       # wildcard path (json text) -> device
        self.classes = {}       # wildcard path (json text) -> [module, qualname] of a named tuple or mapping
        self.others = {}        # path (json text) -> the value kept in the step's state
        self.tensors = []       # (path, detached CPU tensor, original tensor)
        self.containers = []    # (path, original list, tuple or mapping): a name may hold one of the batch's
        self.saved = self._copy(batch, [])
        if not self.tensors:
            raise ValueError("the batch holds no tensor")
        self.added_keys = []
        self._add_ids(sample_ids, problems)

    # --------------------------------------------------------------- walking
    def _copy(self, value, path):
        if isinstance(value, torch.Tensor):
            self.devices[_wild(path)] = str(value.device)
            cpu = value.detach().cpu()
            self.tensors.append((path, cpu, value))
            return cpu
        if isinstance(value, (collections.abc.Mapping, list, tuple)) and value:
            self.containers.append((path, value))
        if isinstance(value, collections.abc.Mapping):
            items = {k: self._copy(v, path + [k]) for k, v in value.items()}
            if type(value) not in (dict, collections.OrderedDict):  # a tokenizer's BatchEncoding, say
                self.classes[_wild(path)] = [type(value).__module__, type(value).__qualname__]
            return items
        if isinstance(value, (list, tuple)):
            items = [self._copy(v, path + [i]) for i, v in enumerate(value)]
            if _is_namedtuple(value):
                self.classes[_wild(path)] = [type(value).__module__, type(value).__qualname__]
                return tuple(items)
            return tuple(items) if isinstance(value, tuple) else items
        if isinstance(value, _PLAIN):
            return value
        self.others[_key(path)] = value
        return None

    def _add_ids(self, sample_ids, problems):
        """The ids the user gave, as `sample_id` of a dict batch (the trial
        takes the key out again before the step sees the batch)."""
        if sample_ids is None:
            return
        ids = sample_ids.detach().cpu().reshape(-1).to(torch.int64) if isinstance(sample_ids, torch.Tensor) \
            else torch.tensor([int(i) for i in sample_ids], dtype=torch.int64)
        if not isinstance(self.saved, dict):
            problems.append("sample_ids given, but the batch is a %s: the report numbers the samples by their position"
                            % type(self.given).__name__)
            return
        if any(torch.equal(t.reshape(-1).to(torch.int64), ids) for _, t, _ in self.tensors
               if t.dim() == 1 and t.numel() == ids.numel() and not t.is_floating_point()):
            return  # the batch holds them already
        key = "sample_id"
        while key in self.saved:
            key = "_" + key
        self.saved[key] = ids
        self.added_keys.append(key)

    # --------------------------------------------------------------- facts
    def batch_size(self):
        """How many samples: a list of per-sample records (dicts, or lists and
        tuples of them) is as long as it is; else the first dimension most
        tensors, per-sample lists of plain values and lists of records
        share. A tensor inside a record is the record's own (a detection
        target's boxes [n_i, 4]) and has no say; a packed graph batch's 104
        nodes under x and batch tie with its 8 labels and 8 names, and the
        samples win the tie."""
        saved = self.saved
        if _is_record_list(saved):
            return len(saved)
        records = list(_record_lists(saved, []))
        sizes = {}
        for path, t, _ in self.tensors:
            if t.dim() >= 1 and not any(path[:len(at)] == at for at, _ in records):
                sizes[t.shape[0]] = sizes.get(t.shape[0], 0) + 1
        for entries in list(_plain_lists(saved)) + [entries for _, entries in records]:
            sizes[len(entries)] = sizes.get(len(entries), 0) + 1
        return min(sorted(sizes), key=lambda s: -sizes[s]) if sizes else 0

    def layout(self):
        """What captured_step.py needs to give the step this batch again."""
        return {"devices": self.devices, "classes": self.classes, "added_keys": self.added_keys,
                "kind": type(self.given).__name__}

    def path_of(self, value):
        """The path of a tensor, list, tuple or mapping of the batch the step
        was given, or None. A loop that unpacks its batch in the `for`
        statement (`for images, targets in loader`) names its parts: each
        is the batch's, cut with it, not a variable of the step's state
        that every candidate would carry whole. Empty ones are no part
        (every `()` is the same object)."""
        if isinstance(value, torch.Tensor):
            return next((path for path, _, original in self.tensors if original is value), None)
        return next((path for path, original in self.containers if original is value), None)

    def per_sample_lookalike(self, value):
        """Whether a value that is not the batch's looks like one of its
        per-sample lists: as many entries as the batch has samples, tensors
        or records among them (a copy of the targets made before the block)."""
        n = self.batch_size()
        return isinstance(value, (list, tuple)) and n > 1 and len(value) == n and any(
            isinstance(v, (torch.Tensor, collections.abc.Mapping)) for v in value)


def display_path(path):
    """A path as minrepro names it: 'image', '[1]', 'targets[3].boxes'."""
    out = ""
    for i, k in enumerate(path):
        if isinstance(k, int):
            out += "[%d]" % k
        elif i == 0:
            out += str(k)
        else:
            out += "." + str(k) if str(k).isidentifier() else '["%s"]' % k
    return out or "."


def _key(path):
    return json.dumps(path)


def _wild(path):
    return _key(["*" if isinstance(k, int) else k for k in path])
