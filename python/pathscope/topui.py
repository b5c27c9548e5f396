"""The terminal UI of `pathscope top` (Textual; imported only when the UI runs, so the rest
of the CLI needs only the standard library).

Keys: Tab / Shift+Tab or 1-6 switch views (pathscope.top.VIEWS), `a` asks for a SPEC and
adds it to every process of the job on this node (the `pathscope probe --job` flow), `r`
removes the probe of the selected row of the probes view from every process, `q` quits.
The snapshot is taken again every REFRESH_S in a worker thread, as are probe requests, so
the screen answers keys while the symbolizer or a process works.
"""
from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Input, Static

from pathscope.errors import PathscopeError
from pathscope.probes import (RankResult, format_results, job_targets, probe_add,
                              probe_remove)
from pathscope.top import VIEW_TITLES, VIEWS, LiveView, view_rows

REFRESH_S = 1.0


class TopApp(App[None]):
    CSS = """
    #title { height: 1; background: $primary; }
    #status { height: auto; max-height: 12; }
    #spec { display: none; }
    """
    BINDINGS = [
        Binding("tab", "next_view(1)", "next view", priority=True),
        Binding("shift+tab", "next_view(-1)", "previous view", priority=True),
        *[Binding(str(i + 1), f"show('{v}')", VIEW_TITLES[v], show=False)
          for i, v in enumerate(VIEWS)],
        Binding("a", "add_probe", "add probe"),
        Binding("r", "remove_probe", "remove probe"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, view: LiveView):
        super().__init__()
        self.live = view
        self.view_name = VIEWS[0]
        self.doc: Optional[dict[str, Any]] = None
        self.keys: list[str] = []              # the probe name of each row (probes view)
        self.reading = False                   # a snapshot is being taken

    def compose(self) -> ComposeResult:
        yield Static("", id="title")
        yield DataTable(id="table", cursor_type="row", zebra_stripes=True)
        yield Input(placeholder="SPEC to probe in every rank (Enter adds, Esc cancels)",
                    id="spec")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_snapshot()
        self.set_interval(REFRESH_S, self.refresh_snapshot)

    # ---- showing -------------------------------------------------------------------------

    def refresh_snapshot(self) -> None:
        """Every REFRESH_S: a new snapshot, taken off the UI thread (naming new frames runs
        the symbolizer); skipped while the previous one is still being taken."""
        if not self.reading:
            self.reading = True
            self.read_snapshot()

    @work(thread=True, group="snapshot")
    def read_snapshot(self) -> None:
        try:
            doc, error = self.live.snapshot().to_json(), None
        except PathscopeError as e:
            doc, error = None, str(e)
        self.call_from_thread(self.take_snapshot, doc, error)

    def take_snapshot(self, doc: Optional[dict[str, Any]], error: Optional[str]) -> None:
        self.reading = False
        if error is not None:
            self.query_one("#title", Static).update(f"pathscope top: {error}")
            return
        self.doc = doc
        self.show_table()

    def show_table(self) -> None:
        if self.doc is None:
            return
        doc = self.doc
        tabs = "  ".join(f"[{i + 1}] {VIEW_TITLES[v].upper() if v == self.view_name else VIEW_TITLES[v]}"
                         for i, v in enumerate(VIEWS))
        stale = sum(1 for p in doc["processes"] if p["stale"])
        # the views first: a long output directory is cut at the screen's edge
        self.query_one("#title", Static).update(
            f"{tabs}   job {doc['outdir']}: {len(doc['ranks'])} rank(s)"
            + (f", {stale} not updating or gone" if stale else ""))
        headers, rows, align = view_rows(doc, self.view_name)
        self.keys = [r["name"] for r in doc["probes"]] if self.view_name == "probes" else []
        table = self.query_one("#table", DataTable)
        row = table.cursor_row
        table.clear(columns=True)
        table.add_columns(*headers)
        table.add_rows([[Text(cell, justify="right" if a == "r" else "left")
                         for cell, a in zip(row, align)] for row in rows])
        if rows:
            table.move_cursor(row=min(row, len(rows) - 1))

    def action_next_view(self, step: int) -> None:
        self.view_name = VIEWS[(VIEWS.index(self.view_name) + step) % len(VIEWS)]
        self.show_table()

    def action_show(self, view: str) -> None:
        self.view_name = view
        self.show_table()

    def status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    # ---- probes --------------------------------------------------------------------------

    def action_add_probe(self) -> None:
        spec = self.query_one("#spec", Input)
        spec.display = True
        spec.value = ""
        spec.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.query_one("#table", DataTable).focus()
        if event.value.strip():
            self.status(f"adding '{event.value}' ...")
            self.ask("add", event.value.strip())

    def on_key(self, event: Any) -> None:
        spec = self.query_one("#spec", Input)
        if event.key == "escape" and spec.display:
            spec.display = False
            self.query_one("#table", DataTable).focus()

    def action_remove_probe(self) -> None:
        if self.view_name != "probes" or not self.keys:
            self.status("r removes the selected probe of the probes view (key 3)")
            return
        row = self.query_one("#table", DataTable).cursor_row
        if 0 <= row < len(self.keys):
            self.status(f"removing '{self.keys[row]}' ...")
            self.ask("remove", self.keys[row])

    @work(thread=True, exclusive=True, group="probe")
    def ask(self, action: str, argument: str) -> None:
        if self.doc is None:
            return
        try:
            targets = job_targets(self.doc["outdir"])
            if action == "add":
                results = probe_add(targets, argument)
            else:
                results = self._remove(targets, argument)
            text = format_results(results, "added" if action == "add" else "removed", True)
        except PathscopeError as e:
            text = f"pathscope: {e}"
        self.call_from_thread(self.status, text.strip())

    def _remove(self, targets: list[Any], name: str) -> list[RankResult]:
        """Each process's own id of the probe named name (ids differ between processes)."""
        ids = {p["pid"]: p["probe_ids"].get(name) for p in (self.doc or {})["processes"]}
        results = []
        for t in targets:
            probe_id = ids.get(t.target.process.pid)
            if probe_id is not None:
                results.extend(probe_remove([t], str(probe_id)))
        return results


def run_ui(view: LiveView) -> int:
    TopApp(view).run()
    return 0

