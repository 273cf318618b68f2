"""Engine-level derivatives for testing rules without the public API: a JVP and a
VJP of a positional function of arrays, plus the two independent oracles (central
finite differences and the inner-product identity <J^T u, v> = <u, J v>)."""
import numpy as np

from labeled_func.engine import (JVPLevel, JVPTracer, VJPLevel, VJPTracer, active, backward, input_node, node_of,
                                 primal_of, tangent_of)


def engine_jvp(f, primals, tangents):
    """(f(*primals), J(primals) @ tangents) through the forward-mode level (a zero
    tangent for an output that does not depend on them)."""
    level = JVPLevel()
    with active(level):
        out = f(*[JVPTracer(level, p, t) for p, t in zip(primals, tangents)])
        return primal_of(out, level), tangent_of(out, level)


def engine_vjp(f, primals, cotangent):
    """(f(*primals), J(primals)^T @ cotangent) through the reverse-mode level."""
    level = VJPLevel()
    with active(level):
        nodes = [input_node(p) for p in primals]
        out = f(*[VJPTracer(level, p, n) for p, n in zip(primals, nodes)])
        node = node_of(out, level)
        if node is None:
            return primal_of(out, level), [np.zeros_like(p) for p in primals]
        grads = backward([(node, cotangent)], nodes)
        return primal_of(out, level), [np.zeros_like(p) if g is None else g for g, p in zip(grads, primals)]


def central_difference(f, primals, tangents, eps=1e-6):
    """(f(x + eps t) - f(x - eps t)) / 2 eps, in float64 (complex128 for a complex f).
    A complex tangent of a complex primal moves it in both the real and the imaginary
    direction."""
    plus = np.asarray(f(*[p + eps * t for p, t in zip(primals, tangents)]))
    minus = np.asarray(f(*[p - eps * t for p, t in zip(primals, tangents)]))
    wide = np.result_type(plus, minus, np.float64)
    return (plus.astype(wide) - minus.astype(wide)) / (2 * eps)


def check_jvp(f, primals, rng, rtol=1e-6, atol=1e-6, eps=1e-6):
    tangents = [rng.normal(size=np.shape(p)) for p in primals]
    _, tangent_out = engine_jvp(f, primals, tangents)
    expected = central_difference(f, primals, tangents, eps)
    np.testing.assert_allclose(np.asarray(tangent_out, dtype=np.float64), expected, rtol=rtol, atol=atol)


def check_vjp(f, primals, rng, rtol=1e-6, atol=1e-8):
    """<J^T u, v> == <u, J v> with J v from the (separately checked) JVP."""
    out = f(*primals)
    u = rng.normal(size=np.shape(out))
    vs = [rng.normal(size=np.shape(p)) for p in primals]
    _, pulled = engine_vjp(f, primals, u)
    _, pushed = engine_jvp(f, primals, vs)
    left = sum(float(np.sum(np.asarray(g) * v)) for g, v in zip(pulled, vs))
    right = float(np.sum(u * np.asarray(pushed)))
    np.testing.assert_allclose(left, right, rtol=rtol, atol=atol)
