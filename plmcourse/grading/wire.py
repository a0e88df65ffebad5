"""Plain data between a student's kernel and the judge: no pickle, no objects, size limits.

When an instructor grades, the judge (plmcourse.autograde.judge) sends the inputs of each
case to the student's kernel and gets back what the student's function returned. Both
directions go through `encode` and `decode` here, which know a few kinds of value only:

    None, bool, int, float, str, list, tuple, dict, set,
    NumPy arrays and scalars (bool, integer and floating dtypes) -> dtype + shape + bytes,
    torch tensors -> the same, marked as tensors,
    NumPy Generators (PCG64) -> their state.

Anything else is sent as a description ("a Liar object") and arrives as an `Opaque`,
which no judge mistakes for an answer. `decode` builds only base-class arrays and
tensors, so an ndarray subclass whose comparisons always say yes, or a tensor with
hooks, arrives as the plain numbers it holds. An object met twice (x_q passed as x_kv
too) is sent once and arrives twice as the same object.

Messages are framed as 4 bytes of length and a JSON document; `send` and `receive`
refuse anything over MAX_BYTES, and `decode` anything nested deeper than MAX_DEPTH or
holding more than MAX_ITEMS entries.
"""

import base64
import json
import struct

MAX_BYTES = 64 * 1024 ** 2
MAX_DEPTH = 16
MAX_ITEMS = 8 * 1024 ** 2  # array elements and container items, in all
DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"}
TORCH_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32", "float64"}


def _libraries():
    """NumPy and torch, imported on first use: the kernel launcher needs only send() and
    must start in milliseconds."""
    import numpy
    import torch
    return numpy, torch


class WireError(ValueError):
    """A message that breaks the rules above; the judge fails the case that sent it."""


class Opaque:
    """Stands for a value that cannot travel: what the student's function returned, described."""

    def __init__(self, description):
        self.description = description

    def __repr__(self):
        return f"<{self.description}>"


def describe(x):
    """'None', 'a list of 3 items', 'a torch.Tensor', 'a NumPy array', 'a float', 'a Liar object'..."""
    if x is None:
        return "None"
    np, torch = _libraries()
    if isinstance(x, torch.Tensor):
        return "a torch.Tensor"
    if isinstance(x, np.ndarray):
        return "a NumPy array"
    if isinstance(x, Opaque):
        return x.description
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)} item" + ("" if len(x) == 1 else "s")
    return f"a {type(x).__name__}"


# ----------------------------------------------------------------------------
# Encoding (either side)


def encode(value):
    """A JSON-able document for `value`; what cannot travel becomes a description."""
    return _Encoder().encode(value, 0)


class _Encoder:
    def __init__(self):
        self.seen = {}  # id(array or tensor) -> its number, for values met twice

    def encode(self, x, depth):
        np, torch = _libraries()
        if depth > MAX_DEPTH:
            return {"opaque": "a value nested too deeply"}
        if x is None or type(x) in (bool, str):
            return x
        if type(x) is int:
            return x if -2 ** 63 <= x < 2 ** 64 else {"opaque": "an int too large"}
        if type(x) is float:
            return {"float": repr(x)}
        if isinstance(x, (np.ndarray, np.generic, torch.Tensor)):
            return self.array(x)
        if type(x) in (list, tuple, set, frozenset):
            kind = "list" if type(x) is frozenset else type(x).__name__
            items = sorted(x, key=repr) if kind == "set" else x
            return {kind: [self.encode(item, depth + 1) for item in items]}
        if type(x) is dict:
            return {"dict": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in x.items()]}
        if type(x) is np.random.Generator and type(x.bit_generator) is np.random.PCG64:
            return {"rng": x.bit_generator.state}
        return {"opaque": describe(x) if not type(x).__module__ == "builtins" else f"a {type(x).__name__}"}

    def array(self, x):
        np, torch = _libraries()
        key = id(x)
        if key in self.seen:
            return {"same": self.seen[key]}
        is_tensor = isinstance(x, torch.Tensor)
        if is_tensor:
            plain = torch.Tensor.detach(x)
            if plain.dtype == torch.bfloat16:
                plain = plain.float()
            data = np.array(torch.Tensor.numpy(torch.Tensor.cpu(plain)))
        else:
            data = np.array(x)  # a base-class copy, whatever x's class says about itself
        if str(data.dtype) not in DTYPES:
            return {"opaque": f"{'a tensor' if is_tensor else 'an array'} of dtype {data.dtype}"}
        self.seen[key] = len(self.seen)
        doc = {"dtype": str(data.dtype), "shape": list(data.shape),
               "bytes": base64.b64encode(np.ascontiguousarray(data).tobytes()).decode("ascii")}
        if is_tensor:
            doc["tensor"] = str(x.dtype).removeprefix("torch.")
            doc["requires_grad"] = bool(x.requires_grad)
        elif isinstance(x, np.generic):
            doc["scalar"] = True
        return {"array": doc}


# ----------------------------------------------------------------------------
# Decoding (either side; strict, since the other side may be hostile)


def decode(doc, grad_leaves=False):
    """The value `doc` stands for. grad_leaves: tensors sent with requires_grad get it back."""
    return _Decoder(grad_leaves).decode(doc, 0)


class _Decoder:
    def __init__(self, grad_leaves):
        self.grad_leaves = grad_leaves
        self.arrays = []
        self.items = 0

    def count(self, n):
        self.items += n
        if self.items > MAX_ITEMS:
            raise WireError(f"the value holds more than {MAX_ITEMS} items")

    def decode(self, doc, depth):
        if depth > MAX_DEPTH:
            raise WireError("the value is nested too deeply")
        self.count(1)
        if doc is None or type(doc) in (bool, int, str):
            return doc
        if type(doc) is not dict or len(doc) != 1:
            raise WireError("not a value the wire knows")
        (kind, body), = doc.items()
        if kind == "float":
            return float(body)
        if kind in ("list", "tuple", "set"):
            if type(body) is not list:
                raise WireError(f"a {kind} that is not a list")
            items = [self.decode(item, depth + 1) for item in body]
            return {"list": list, "tuple": tuple, "set": set}[kind](items)
        if kind == "dict":
            if type(body) is not list or any(type(p) is not list or len(p) != 2 for p in body):
                raise WireError("a dict that is not a list of pairs")
            return {self.decode(k, depth + 1): self.decode(v, depth + 1) for k, v in body}
        if kind == "array":
            return self.array(body)
        if kind == "same":
            if type(body) is not int or not 0 <= body < len(self.arrays):
                raise WireError("a reference to an array not sent")
            return self.arrays[body]
        if kind == "rng":
            return _generator(body)
        if kind == "opaque":
            return Opaque(str(body)[:200])
        raise WireError(f"unknown kind {kind!r}")

    def array(self, doc):
        np, torch = _libraries()
        if type(doc) is not dict or doc.get("dtype") not in DTYPES or type(doc.get("shape")) is not list:
            raise WireError("an array without a known dtype and shape")
        shape = doc["shape"]
        if len(shape) > 32 or any(type(n) is not int or n < 0 for n in shape):
            raise WireError("an array with an impossible shape")
        size = int(np.prod(shape, dtype=np.float64))
        self.count(size)
        raw = base64.b64decode(doc.get("bytes", ""), validate=True)
        dtype = np.dtype(doc["dtype"])
        if len(raw) != size * dtype.itemsize:
            raise WireError("an array whose bytes do not fill its shape")
        value = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        if "tensor" in doc:
            target = getattr(torch, doc["tensor"]) if doc["tensor"] in TORCH_DTYPES else None
            if target is None or (value.dtype.kind == "u" and value.dtype != np.uint8):
                raise WireError("a tensor of an unknown dtype")
            value = torch.from_numpy(value).to(target)
            if self.grad_leaves and doc.get("requires_grad") and value.is_floating_point():
                value.requires_grad_(True)
        elif doc.get("scalar"):
            value = value.reshape(())[()]  # a NumPy scalar, e.g. np.float64
        self.arrays.append(value)
        return value


def _generator(state):
    np, _ = _libraries()
    if (type(state) is not dict or state.get("bit_generator") != "PCG64"
            or type(state.get("state")) is not dict):
        raise WireError("a random generator other than NumPy's PCG64")
    rng = np.random.default_rng()
    try:
        rng.bit_generator.state = state
    except (TypeError, ValueError, KeyError) as error:
        raise WireError(f"a random generator with a broken state ({error})") from None
    return rng


# ----------------------------------------------------------------------------
# Framing


def send(sock, message):
    """Write one message (a JSON-able dict) to a connected socket."""
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_BYTES:
        data = json.dumps({"too_large": len(data)}).encode("utf-8")
    sock.sendall(struct.pack(">I", len(data)) + data)


def receive(sock):
    """Read one message; None when the other side has closed the connection."""
    header = _read_exactly(sock, 4)
    if header is None:
        return None
    (length,) = struct.unpack(">I", header)
    if length > MAX_BYTES:
        raise WireError(f"a message of {length} bytes, more than {MAX_BYTES}")
    data = _read_exactly(sock, length)
    if data is None:
        return None
    try:
        message = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise WireError(f"a message that is not JSON ({error})") from None
    if type(message) is not dict:
        raise WireError("a message that is not a JSON object")
    return message


def _read_exactly(sock, n):
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
