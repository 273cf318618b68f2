"""The :class:`Program` that a recording fills: input slots, nodes in order, output slots.
``prune`` drops dead code, runs the rewrites (passes.py) and fusion (fusion.py), and lays
the program out for runs (the buffers a run passes on: planning.py); ``run`` replays it."""
from __future__ import annotations

import threading

import numpy as np

from labeled_func_kernels import buffers

from . import banded, fusion, passes, planning
from .collections_paused import fewer_collections
from .nodes import Constant
from .planning import _bound, _reads_only, _writes_into


class Program:
    """Input slots, nodes in order, output slots; ``run(arrays)`` replays it."""

    def __init__(self):
        self.inputs = []
        self.nodes = []
        self.outputs = []
        self.layouts = {}  # input slot -> (shape, dtype) of a NumPy input
        self.strides = {}  # input slot -> its strides
        self._plan = None
        self._pruned = False  # set once prune has laid the whole plan out
        self._lock = threading.Lock()
        self.keep_buffers = False  # keep a run's slabs for the next run (lf.jit(keep_buffers=True))
        self._kept = []

    def prune(self):
        """Drop the nodes that no output reads (dead code), then lay the program out for
        runs: the values in one list (inputs, constants, then each node's output), each
        node a pre-bound callable with the positions it reads, and the positions whose last
        reader it is (freed as soon as it has run: a run holds only the live arrays).

        Buffers: a node that writes a fresh NumPy array of ``POOL_MIN_BYTES`` or more through
        ``out=`` (ufuncs, fused expressions, safe products) takes it from the arrays that
        earlier nodes of the same run no longer need (same shape and dtype), when every
        reader of those arrays only reads them (no view of them can outlive their slot):
        a long program allocates a few buffers instead of one per operation, and large
        fresh allocations cost page faults."""
        self._drop_dead()
        self.drop_ones()
        self.simplify()
        self.band()
        self._drop_dead()
        self.fuse()
        self.contract()
        self.spread()
        self.fold_rolls()
        self.rematerialize()
        self.share_checks()
        position = {slot: k for k, slot in enumerate(self.inputs)}
        constants = []
        contiguous = self.contiguous_constants() or {}
        for node in self.nodes:
            for ref in node.refs:
                if type(ref) is not int and ref not in position:  # a constant that nodes share: once
                    position[ref] = len(self.inputs) + len(constants)
                    constants.append(contiguous.get(ref, ref.value))
        for node in self.nodes:
            position[node.slot] = len(position)
        last_reader, only_read, pooled = {}, {}, {}
        for index, node in enumerate(self.nodes):
            reads_only = _reads_only(node)
            pooled[node.slot] = _writes_into(node, reads_only)
            for ref in node.refs:
                if type(ref) is int:
                    last_reader[ref] = index
                    only_read[ref] = only_read.get(ref, True) and reads_only
        outputs = set(self.outputs)
        frees, recycles = {}, {}  # index of a node -> what dies once it has run (few nodes have any)
        for index, node in enumerate(self.nodes):
            if node.effect and node.slot not in last_reader and node.slot not in outputs:
                frees.setdefault(index, []).append(position[node.slot])  # an effect's value nobody reads
        for slot, index in last_reader.items():
            if slot in outputs:
                continue
            if pooled.get(slot) is not None and only_read[slot]:
                recycles.setdefault(index, []).append((position[slot], pooled[slot]))
            else:
                frees.setdefault(index, []).append(position[slot])
        self._constants = constants
        self._size = len(position)
        self._outputs = [position[slot] for slot in self.outputs]
        self._plan = []
        numpy_slots = self._slot_layouts()
        for index, node in enumerate(self.nodes):
            free, recycle = frees.get(index, ()), recycles.get(index, ())
            function, reads = _bound(node, numpy_slots), tuple(position[ref] for ref in node.refs)
            key, into = pooled[node.slot], None
            if key is not None and type(function) is np.ufunc:
                # an input of the result's shape read last here: the ufunc writes over it
                for entry in recycle:
                    if entry[1] == key:
                        into = entry[0]
                        recycle = [other for other in recycle if other is not entry]
                        break
            self._plan.append((function, reads, position[node.slot], tuple(free), key, tuple(recycle), into))
        if self.keep_buffers:  # the scratch memory kept from one run to the next: one slab per kind
            self._lay_out_slabs()
        else:  # fresh buffers one by one, from the kept blocks and the heap (see _lay_out_slabs)
            self._slabs = []
        self._pruned = True
        return self

    # --- the rewrites (passes.py), fusion (fusion.py) and the slabs (planning.py) that prune runs --------
    def _lay_out_slabs(self):
        return planning._lay_out_slabs(self)

    def share_checks(self):
        return passes.share_checks(self)

    def drop_ones(self):
        return passes.drop_ones(self)

    def simplify(self):
        return passes.simplify(self)

    def band(self):
        return banded.band(self)

    def contract(self):
        return passes.contract(self)

    def spread(self):
        return passes.spread(self)

    def fold_rolls(self):
        return passes.fold_rolls(self)

    def rematerialize(self):
        return passes.rematerialize(self)

    def contiguous_constants(self):
        return passes.contiguous_constants(self.nodes)

    def fuse(self):
        return fusion.fuse(self)

    def ready(self):
        """The program pruned (``prune``), once, whichever thread asks first; ``self``.

        lf.jit's first call takes its results from the trace, which computes as it records:
        the program is pruned when it is first replayed, so that a one-shot call never pays
        for the passes and the planning (run with fewer garbage collections, as the trace:
        ``collections_paused``)."""
        if not self._pruned:
            with self._lock:
                if not self._pruned:
                    with fewer_collections():
                        self.prune()
        return self

    def run(self, arrays):
        """The outputs for new input ``arrays`` (in the order of the inputs); the results
        written into buffers passed on from dead arrays (see ``prune``, which the first run
        does first: ``ready``)."""
        self.ready()
        env = [*arrays, *self._constants]
        env.extend([None] * (self._size - len(env)))
        pool = {}
        slabs = None
        if self._slabs:  # laid out for keep_buffers=True only (prune)
            try:
                slabs = self._kept.pop()  # atomic: two threads never take the same slabs
            except IndexError:  # the first run, or another thread's: warm memory where it fits the kept blocks
                slabs = [buffers.empty(shape, dtype) for shape, dtype in self._slabs]
        for function, reads, slot, frees, key, recycles, into in self._plan:
            if into is not None:
                if type(into) is tuple:  # a fresh buffer: its place in this run's slab
                    env[slot] = function(*[env[r] for r in reads], out=slabs[into[0]][into[1]])
                else:
                    env[slot] = function(*[env[r] for r in reads], out=env[into])
                    env[into] = None
            elif key is not None:  # a buffer of this call no longer needed, else a kept block
                spare = pool.get(key)
                env[slot] = function(*[env[r] for r in reads], out=spare.pop() if spare else buffers.empty(*key))
            elif len(reads) == 1:
                env[slot] = function(env[reads[0]])
            elif len(reads) == 2:
                env[slot] = function(env[reads[0]], env[reads[1]])
            else:
                env[slot] = function(*[env[r] for r in reads])
            for dead in frees:
                env[dead] = None
            for dead, dead_key in recycles:
                pool.setdefault(dead_key, []).append(env[dead])
                env[dead] = None
        outputs = [env[k] for k in self._outputs]
        if slabs and not self._kept:
            self._kept.append(slabs)  # no output holds them (see _lay_out_slabs)
        return outputs

    def _fresh_slot(self):
        """A slot number no node or input of the program uses (for nodes a rewrite adds)."""
        return max([node.slot for node in self.nodes] + list(self.inputs), default=-1) + 1

    def _readers(self):
        """The node computing each slot, and how many times each slot is read."""
        producer, readers = {}, {}
        for node in self.nodes:
            producer[node.slot] = node
            for ref in node.refs:
                if type(ref) is int:
                    readers[ref] = readers.get(ref, 0) + 1
        return producer, readers

    def _layouts(self):
        """(shape, dtype) and recorded strides of every NumPy input, constant and result."""
        layout, strides = self._slot_layouts(), dict(self.strides)
        ndarray = np.ndarray
        for node in self.nodes:
            if node.out is not None:
                strides[node.slot] = node.strides
            for ref in node.refs:
                if type(ref) is Constant and type(ref.value) is ndarray:
                    strides[ref] = ref.value.strides
        return layout, strides

    def _slot_layouts(self):
        """(shape, dtype) of every NumPy input and result, by slot (``_layouts`` without the
        strides, for the passes that read no strides)."""
        layout = dict(self.layouts)
        layout.update({node.slot: node.out for node in self.nodes if node.out is not None})
        return layout

    def _drop_dead(self):
        needed = set(self.outputs)
        kept = []
        for node in reversed(self.nodes):
            if node.slot in needed or node.effect:
                kept.append(node)
                for ref in node.refs:
                    if type(ref) is int:
                        needed.add(ref)
        self.nodes = kept[::-1]

    def __len__(self):
        return len(self.nodes)
