"""Diagnostics: every error a kernel author can cause is a TleError with a source span.

A TleError renders like clang's diagnostics:

    softmax.tle:4:13: error: unknown name 'lod'
        let t = lod(x, tile=[1, BLOCK], at=[row, 0])
                ^^^
    note: did you mean 'load'?

Every stage (parser, checker, lowerings, backends) raises TleError; tlec prints `render(err)` and exits 1.
"""
from __future__ import annotations

import functools
import linecache
import unicodedata
import warnings
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """A range of source text: 1-based lines and columns, end column exclusive."""
    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def to(self, other: "Span") -> "Span":
        """The span from the start of self to the end of other."""
        return Span(self.file, self.line, self.col, other.end_line or other.line, other.end_col or other.col + 1)


UNKNOWN = Span("<unknown>", 0, 0)

# Source texts registered by the parser, so that errors raised far from it can still show the line.
_sources: dict[str, str] = {}


def register_source(file: str, text: str) -> None:
    _sources[file] = text


def source_line(file: str, line: int) -> str | None:
    text = _sources.get(file)
    if text is not None:
        lines = text.splitlines()
        return lines[line - 1] if 0 < line <= len(lines) else None
    got = linecache.getline(file, line)
    return got.rstrip("\n") if got else None


def call_at(span, names: tuple[str, ...], default: str) -> str:
    """Which of the builtins `names` the call at span is, from its source text (argsort or sort: one network serves
    both; scatter or a store: one message serves both); `default` where none is or the text is not at hand."""
    line = source_line(span.file, span.line) if span is not None and span.line > 0 else None
    text = line[span.col - 1:] if line else ""
    return next((n for n in names if text.startswith(n + "(")), default)


def _width(s: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


@dataclass
class Note:
    message: str
    span: Span | None = None


class TleError(Exception):
    """An error in a kernel author's program, at a source location."""

    def __init__(self, span: Span | None, message: str, notes: list[Note | str] | None = None):
        super().__init__(message)
        self.span = span or UNKNOWN
        self.message = message
        self.notes = [n if isinstance(n, Note) else Note(n) for n in (notes or [])]

    def __str__(self) -> str:
        return render(self)


@dataclass(frozen=True)
class NetworkSpan(Span):
    """The span (the call's) of a reduction that moves elements between lanes: a compare-and-swap step or a halving
    of a sort or topk network (tle/bitonic.py), a swap of flip(), take()'s max. The lowering names its location
    "tle.network", so that the interpreter's padded-lanes check (runtime/padded_lanes.py) can tell these steps from
    reductions the kernel wrote: it moves the padded lanes with the elements instead of checking them."""

    @staticmethod
    def of(span: Span) -> "NetworkSpan":
        return NetworkSpan(span.file, span.line, span.col, span.end_line, span.end_col)


class TleWarning(UserWarning):
    """A program that compiles but almost surely does not do what its author meant (a kernel that writes nothing).
    Its message is rendered as an error's is, with `warning:` and the source line under a caret."""


def warn(span: Span, message: str, notes: list[Note | str] | None = None) -> None:
    """A TleWarning at span, attributed to the kernel's file and line (Python shows that line under it)."""
    warnings.warn_explicit(render(TleError(span, message, notes), "warning"), TleWarning, span.file, span.line)


class TlePaddingWarning(UserWarning):
    """The interpreter saw a result depend on the lanes a load padded past its tensor's edge (a max over a ragged
    row padded with 0): well defined, and the GPU computes the same value, but almost always a mistake."""


def _snippet(span: Span) -> list[str]:
    """The source line and a caret line under span's columns (tabs expanded, wide characters counted twice)."""
    raw = source_line(span.file, span.line) if span.line > 0 else None
    if raw is None:
        return []
    start = max(span.col, 1)
    if span.end_line in (0, span.line) and span.end_col > start:
        end = span.end_col
    elif span.end_line > span.line:
        end = len(raw) + 1  # a span over several lines: underline to the end of its first line
    else:
        end = start + 1
    end = max(start + 1, min(end, len(raw) + 1))
    # Columns count characters; the display expands tabs (to 4) from the start of the line, so measure prefixes.
    lead = _width(raw[: start - 1].expandtabs(4))
    carets = max(1, _width(raw[: end - 1].expandtabs(4)) - lead)
    return ["    " + raw.expandtabs(4), "    " + " " * lead + "^" * carets]


def render(err: TleError, severity: str = "error") -> str:
    """clang style: `file:line:col: error: message`, the source line, carets under the span, then the notes.
    severity "warning" renders a diagnostic that does not stop the compile (tlec -v's ptxas warnings)."""
    lines = [f"{_where(err.span)}{severity}: {err.message}", *_snippet(err.span)]
    for note in err.notes:
        if note.span is not None:
            lines.append(f"{_where(note.span)}note: {note.message}")
            lines.extend(_snippet(note.span))
        else:
            lines.append(f"note: {note.message}")
    return "\n".join(lines)


def _where(span: Span) -> str:
    """The `file:line:col: ` prefix; an error about a whole file has no line, one about nothing in particular
    (a bad kernel name given to the API) has no prefix."""
    if span == UNKNOWN:
        return ""
    return f"{span}: " if span.line > 0 else f"{span.file}: "


def span_of_location(loc) -> Span | None:
    """Turn an MLIR Location (FileLineColLoc, possibly wrapped in a NameLoc/CallSiteLoc) back into a Span."""
    try:
        text = str(loc)
    except Exception:  # noqa: BLE001 - a location that cannot print has no span
        return None
    return span_of_location_text(text)


def span_of_location_text(text: str) -> Span | None:
    """Parse `loc("file":L:C)` or `loc("file":L:C to L2:C2)` (the first file location in the text)."""
    import re
    m = re.search(r'"([^"]+)":(\d+):(\d+)(?: to (\d+)?:(\d+))?', text)
    if not m:
        return None
    file, line, col = m.group(1), int(m.group(2)), int(m.group(3))
    end_line = int(m.group(4)) if m.group(4) else line
    end_col = int(m.group(5)) if m.group(5) else 0
    return Span(file, line, col, end_line, end_col)


@dataclass
class Diagnostics:
    """Collects several errors so one run can report more than the first (the checker uses it)."""
    errors: list[TleError] = field(default_factory=list)

    def add(self, err: TleError) -> None:
        self.errors.append(err)

    def raise_if_any(self) -> None:
        if self.errors:
            raise self.errors[0] if len(self.errors) == 1 else TleErrors(self.errors)


class TleErrors(TleError):
    """Several errors found in one pass; renders each."""

    def __init__(self, errors: list[TleError]):
        super().__init__(errors[0].span, errors[0].message, errors[0].notes)
        self.errors = errors

    def __str__(self) -> str:
        return "\n".join(render(e) for e in self.errors)


def without_internal_frames(e: TleError) -> TleError:
    """A TleError as a public entry point re-raises it: with no traceback of tle's own frames (the message says
    where in the kernel the mistake is; twenty checker frames above it only bury that). TLE_DEBUG=4 keeps them."""
    from .debug import level
    return e if level() >= 4 else e.with_traceback(None)


def user_facing(fn):
    """A public entry point (tle.compile, kernel.ir, kernel.tune) whose TleErrors come out without_internal_frames."""
    @functools.wraps(fn)
    def entry(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TleError as e:
            raise without_internal_frames(e) from e.__cause__
    return entry
