"""What the reducers need to know about a collated batch, as capture sees it.

The same rules as `minrepro init` (harness/case_inference.cc), so that a
captured case and an inferred one describe one batch the same way: the
samples are dimension 0 of its most common size; ids are a 1-D integer
tensor named like sample_id with one unique value per sample; lengths are a
1-D integer tensor within the padded length that padded tensors share (the
longest sample at it); each padded tensor's padding is the one value every
position past its sample's length holds. Every choice is said in `notes`.
One difference: without a lengths tensor capture declares no sequence axis
(init declares dimension 1 for the user to check; nobody checks a capture
written at 3 a.m., and dimension 1 of an image batch is its channels)."""
import torch

ID_NAMES = ("sample_id", "sample_ids", "ids", "id", "index", "indices", "idx", "sample_index",
            "dataset_index", "uid")


class Inferred:
    def __init__(self):
        self.samples = 0
        self.sample_tensors = []   # names, sample axis 0
        self.ids = None
        self.lengths = None
        self.padding = {}          # sequence tensor -> padding value (sequence axis 1)
        self.notes = []


def _per_sample_int(t, n):
    return t.dim() == 1 and t.shape[0] == n and not t.is_floating_point() and not t.is_complex() \
        and t.dtype != torch.bool


def _most_common(sizes):
    votes = {}
    for s in sizes:
        votes[s] = votes.get(s, 0) + 1
    return max(sorted(votes), key=lambda s: votes[s]) if votes else None


def _find_ids(tensors, n, out):
    for wanted in ID_NAMES:
        for name, t in tensors.items():
            if name.lower() == wanted and _per_sample_int(t, n):
                if torch.unique(t).numel() == n:
                    out.notes.append("sample ids: '%s'" % name)
                    return name
                out.notes.append("'%s' is named like sample ids but repeats values: not taken as ids" % name)
    return None


def _padding_of(t, lengths):
    past = torch.arange(t.shape[1]).unsqueeze(0) >= lengths.to(torch.int64).unsqueeze(1)
    for _ in range(2, t.dim()):
        past = past.unsqueeze(-1)
    padded = t.masked_select(past.expand(t.shape)).to(torch.float64)
    if padded.numel() == 0 or not bool((padded == padded[0]).all()):
        return None
    value = padded[0].item()
    return int(value) if value == int(value) else value


def _length_tensors(tensors, n, length, ids):
    """Per-sample integer tensors whose values lie in [0, length], the longest at it."""
    return [name for name, t in tensors.items() if name != ids and _per_sample_int(t, n) and n > 0
            and int(t.min()) >= 0 and int(t.max()) == length]


def _padded_length(tensors, n, ids):
    """The size of dimension 1 the padded tensors share: one that a lengths tensor
    fits first (a [B, 4] feature tensor beside [B, 20] tokens is not the sequence),
    then the most tensors, then the longest."""
    votes = {}
    for t in tensors.values():
        if t.dim() >= 2 and t.shape[0] == n:
            votes[t.shape[1]] = votes.get(t.shape[1], 0) + 1
    if not votes:
        return None
    return max(votes, key=lambda s: (bool(_length_tensors(tensors, n, s, ids)), votes[s], s))


def _find_sequences(tensors, out):
    n = out.samples
    length = _padded_length(tensors, n, out.ids)
    if length is None:
        return
    fits = _length_tensors(tensors, n, length, out.ids)
    named = [name for name in fits if "len" in name.lower()]
    if fits:
        out.lengths = (named or fits)[0]
        out.notes.append("lengths: '%s' (values within the padded length %d, the longest at it)%s"
                         % (out.lengths, length, "; also possible: " + ", ".join(fits) if len(fits) > 1 else ""))
        out.sample_tensors.remove(out.lengths)
    else:
        return  # without lengths the padding cannot be seen: no sequence axes are declared
    for name, t in tensors.items():
        if t.dim() < 2 or t.shape[0] != n or t.shape[1] != length:
            continue
        pad = _padding_of(t, tensors[out.lengths])
        if pad is None:
            out.notes.append("'%s' is not padded with one value past each sample's length: no sequence axis" % name)
            continue
        out.padding[name] = pad
    if out.padding:
        out.notes.append("sequence axis 1 (length %d) of: %s" % (
            length, ", ".join("%s padded with %s" % (k, v) for k, v in out.padding.items())))


def infer(tensors):
    """tensors: name -> CPU tensor, as batch.pt holds them."""
    out = Inferred()
    n = _most_common([t.shape[0] for t in tensors.values() if t.dim() >= 1])
    if n is None:
        raise ValueError("no tensor of the batch has a dimension to take samples from (all are scalars)")
    out.samples = n
    out.sample_tensors = [name for name, t in tensors.items() if t.dim() >= 1 and t.shape[0] == n]
    out.ids = _find_ids(tensors, n, out)
    if out.ids:
        out.sample_tensors.remove(out.ids)
    _find_sequences(tensors, out)
    return out
