"""Structures of arrays: any mapping, list or tuple (subclasses included: a torch state
dict is an OrderedDict, a batch may be a namedtuple), nested, with arrays as leaves.
to_device, copy and convert_memory take one apart into its leaves, move them in one
batch, and rebuild the same structure of results: the same type wherever that type
can be rebuilt (an OrderedDict keeps its class and attributes, such as a state dict's
_metadata), else the plain dict, list or tuple it behaves as."""
import copy as _copy
import re
from collections.abc import Mapping

_LEAF, _MAPPING, _SEQUENCE = 0, 1, 2
_KINDS = {list: _SEQUENCE, tuple: _SEQUENCE, dict: _MAPPING}  # type -> kind, filled as types are met


def kind(x):
    """_MAPPING, _SEQUENCE, or _LEAF for an array (or anything else that is not a structure)."""
    cls = type(x)
    found = _KINDS.get(cls)
    if found is None:
        found = _MAPPING if issubclass(cls, Mapping) else _SEQUENCE if issubclass(cls, (list, tuple)) else _LEAF
        if len(_KINDS) < 256:  # a program makes few types; past that, asked each time
            _KINDS[cls] = found
    return found


def is_structure(x):
    return kind(x) != _LEAF


# Loops, not comprehensions: a comprehension that reads a function's argument makes
# that argument a cell, an allocation on every call, and CPython 3.11 leaks the cells
# already made when one of them cannot be (tests/python/oom_walk.py walks every allocation).
def leaves(x, out):
    """The arrays of a structure, depth first, in mapping order, appended to `out`."""
    try:
        return _leaves(x, out)
    except RecursionError:
        raise endless() from None


def _leaves(x, out):
    found = kind(x)
    if found == _MAPPING:
        for item in x.values():
            _leaves(item, out)
    elif found == _SEQUENCE:
        for item in x:
            _leaves(item, out)
    else:
        out.append(x)
    return out


def endless():
    return ValueError("arraybridge: a structure that contains itself (or nests deeper than Python's recursion "
                      "limit) has no end to walk: pass a tree of mappings, lists and tuples of arrays")


def places(x, where, out):
    """Where each leaf of `x` sits, in leaves' order: "x['fc.weight']", "x[2][0]"."""
    found = kind(x)
    if found == _MAPPING:
        for key, item in x.items():
            places(item, f"{where}[{key!r}]", out)
    elif found == _SEQUENCE:
        for index, item in enumerate(x):
            places(item, f"{where}[{index}]", out)
    else:
        out.append(where)
    return out


def rebuild(x, results):
    """x's structure again, each leaf replaced by the next of the iterator `results`."""
    found = kind(x)
    if found == _MAPPING:
        pairs = []
        for key, item in x.items():
            pairs.append((key, rebuild(item, results)))
        return _same_mapping(x, pairs)
    if found == _SEQUENCE:
        items = []
        for item in x:
            items.append(rebuild(item, results))
        return _same_sequence(x, items)
    return next(results)


def _same_mapping(x, pairs):
    cls = type(x)
    if cls is dict:
        return dict(pairs)
    if isinstance(x, dict):  # a dict subclass: a shallow copy keeps its class and attributes, then the new values
        try:
            made = _copy.copy(x)
            for key, value in pairs:
                made[key] = value
            return made
        except Exception:  # noqa: BLE001 - a subclass that cannot be copied or set comes back a dict
            return dict(pairs)
    for made_from in (dict(pairs), pairs):  # a Mapping made from a dict, else from its pairs
        try:
            made = cls(made_from)
            if list(made.items()) == pairs:  # not a mapping that stored its argument as it was
                return made
        except Exception:  # noqa: BLE001 - a custom mapping that takes neither comes back a dict
            continue
    return dict(pairs)


def _same_sequence(x, items):
    cls = type(x)
    if cls is list:
        return items
    if cls is tuple:
        return tuple(items)
    # A namedtuple takes its fields through _make; other subclasses their items as one
    # iterable, or one by one (a constructor of *args): kept only where the result holds
    # exactly the items, since cls(items) of a *args class is one item, the list.
    made = _holding(cls._make, items, False) if hasattr(cls, "_make") else _holding(cls, items, False)
    if made is None and not hasattr(cls, "_make"):
        made = _holding(cls, items, True)
    if made is not None:
        return made
    return items if isinstance(x, list) else tuple(items)


# No closure in _same_sequence: a cell is an allocation when its call starts, and
# CPython 3.11 leaks the call's arguments when one cannot be made (oom_walk.py).
def _holding(build, items, spread):
    """build(items), or build(*items) when `spread`, where that holds exactly the items; else None."""
    try:
        made = build(*items) if spread else build(items)
        if len(made) == len(items) and all(a is b for a, b in zip(made, items)):
            return made
    except Exception:  # noqa: BLE001 - a subclass that cannot be built from its items comes back plain
        pass
    return None


def _described(x):
    found = kind(x)
    if found == _LEAF:
        return f"an array (a {type(x).__name__})" if hasattr(x, "__dlpack__") else f"a {type(x).__name__}"
    noun = "key" if found == _MAPPING else "item"
    return f"a {type(x).__name__} of {len(x)} {noun}{'' if len(x) == 1 else 's'}"


def same_shape(src, dst, where="src"):
    """Whether two structures pair up as they lie (every mapping's keys in the same
    order; copy then pairs them by key, in_order_of). Raises ValueError naming the
    first place where they differ (RecursionError for one that contains itself:
    see endless). Its frame is kept small: CPython 3.11 leaks a call's arguments when
    pushing its frame fails (tests/python/oom_walk.py)."""
    src_kind, dst_kind = kind(src), kind(dst)
    if src_kind == _LEAF and dst_kind == _LEAF:
        return True
    if src_kind != dst_kind or len(src) != len(dst) or (src_kind == _MAPPING and src.keys() != dst.keys()):
        _differ(src, dst, where)
    if src_kind == _MAPPING:
        in_order = list(src) == list(dst)
        for key in dst:
            in_order = same_shape(src[key], dst[key], f"{where}[{key!r}]") and in_order
        return in_order
    in_order = True
    for index, (s, d) in enumerate(zip(src, dst)):
        in_order = same_shape(s, d, f"{where}[{index}]") and in_order
    return in_order


def _differ(src, dst, where):
    if kind(src) == kind(dst) == _MAPPING and src.keys() != dst.keys():
        lacks, extra = [], []
        for key in dst:
            if key not in src:
                lacks.append(key)
        for key in src:
            if key not in dst:
                extra.append(key)
        said = [f"{side} lacks {keys}" for side, keys in ((where, lacks), ("dst", extra)) if keys]
        raise ValueError(f"copy: the keys of {where} differ from dst's: {', and '.join(said)}")
    raise ValueError(f"copy: {where} is {_described(src)} but dst there is {_described(dst)}: the two structures "
                     "must match")


def in_order_of(src, dst):
    """src (of the same shape: same_shape) with each mapping's items in dst's key order."""
    found = kind(dst)
    if found == _MAPPING:
        items = {}
        for key in dst:
            items[key] = in_order_of(src[key], dst[key])
        return items
    if found == _SEQUENCE:
        items = []
        for s, d in zip(src, dst):
            items.append(in_order_of(s, d))
        return items
    return src


# A batch item's place as the flat batch names it: "x[777]" (to_device_many), "src[7]" or "srcs[7]" (copy_many),
# or "pair 7" (copy_many's pair, named by its source's place).
_FLAT_PLACE = re.compile(r"\b(x|srcs?|dsts?)\[(\d+)\]|\b(pair) (\d+)\b")


def restated(error, message):
    """`error` again with `message`: its class, its attributes (an ArrayBridgeError's
    status) and its cause; None when its class is not made from one message."""
    try:
        made = type(error)(message)
        made.__dict__.update(error.__dict__)
    except Exception:  # noqa: BLE001 - a class with other arguments keeps its own words
        return None
    made.__cause__, made.__suppress_context__ = error.__cause__, True
    return made


def raise_placed(error, structures, names=None):
    """Raises `error` again with each flat batch place it names ("x[777]") replaced by
    that leaf's place in its structure ("x['fc.weight']"); `structures` maps the flat
    names to the structures, `names` the flat names to the caller's ("srcs" -> "src").
    A copy's "pair 7" becomes "src['fc.weight'] -> dst['fc.weight']".
    Returns when there is nothing to rename."""
    text = str(error)
    names = names or {}

    def role_of(found):
        return found.group(1) or found.group(3)

    def known(role):
        return "src" in structures and "dst" in structures if role == "pair" else role in structures

    if isinstance(error, MemoryError) or not any(known(role_of(found)) for found in _FLAT_PLACE.finditer(text)):
        return
    named = {}

    def places_of(role):
        if role not in named:
            named[role] = ([f"{s} -> {d}" for s, d in zip(places(structures["src"], "src", []),
                                                             places(structures["dst"], "dst", []))]
                           if role == "pair" else places(structures[role], names.get(role, role), []))
        return named[role]

    def place(found):
        role, index = role_of(found), int(found.group(2) or found.group(4))
        listed = places_of(role) if known(role) else []
        return listed[index] if index < len(listed) else found.group(0)

    made = restated(error, _FLAT_PLACE.sub(place, text))
    if made is not None:
        raise made
