"""The one table description (`tpukit.display._table`): its text, its HTML, its options.

Results' ``__repr__`` and ``_repr_html_`` come from it, so what it promises holds for
all of them: the same rows in both, numbers right-aligned, everything escaped once.
"""

import re
from pathlib import Path

import tpukit
from tpukit.display import Column, Line, Report, Row, Section, Table, fact_table

OPS = [Column("opcode"), Column("count", "right", "{:,}".format)]


def test_text_aligns_names_left_and_numbers_right():
    table = Table(OPS, [("add", 1200), ("dot", 2)], rule=True)
    assert table.text() == "opcode  count\n------  -----\nadd     1,200\ndot         2"


def test_html_escapes_once_and_marks_numeric_cells():
    table = Table(OPS, [("<b>", 3)])
    page = table.html()
    assert "<td>&lt;b&gt;</td>" in page and '<td class="num">3</td>' in page
    assert '<th class="num">count</th>' in page and page.startswith("<table>")


def test_a_caption_indents_the_text_and_folds_the_html():
    table = Table(OPS, [("add", 1)], caption="op counts", open=False)
    assert table.text("  ").splitlines() == [
        "  op counts",
        "    opcode  count",
        "    add         1",
    ]
    assert table.html().startswith("<details><summary>op counts</summary><table>")


def test_sections_marks_and_prose_rows():
    columns = [Column(""), Column("a", "right"), Column("b", "right")]
    rows = [
        Section("cost"),
        Row(("flops", "1", "2"), mark="changed"),
        Row(("bytes", "4", "4")),
        Section("program"),
        Row(("signature", "f(x)", "f(x, y)"), mark="changed", prose=True),
        Section("unchanged"),
        Row(("ops", "3", "3")),
    ]
    table = Table(columns, rows, marked_only_in_text=True)
    assert table.text().splitlines() == [
        "         a  b",  # widths of the rows shown
        "cost",
        "  flops  1  2",
        "program",
        "  signature",
        "    a  f(x)",
        "    b  f(x, y)",
    ]
    page = table.html()
    assert page.count('<th colspan="3" class="section">') == 3
    assert page.count('<tr class="changed">') == 2 and "bytes" in page and "ops" in page


def test_text_limit_says_how_many_more_and_where():
    table = Table(OPS, [(f"op{i}", i) for i in range(5)], text_limit=2, more=".op_counts()")
    assert table.text().splitlines()[-1] == "... 3 more: .op_counts()"
    assert table.html().count("<tr>") == 1 + 5  # the notebook shows them all


def test_markup_column_and_facts():
    bar = Column("share", "right", "{:.0%}".format, markup=lambda v: f"<i>{v:.0%}</i>")
    assert "<i>50%</i>" in Table([bar], [(0.5,)]).html()
    assert Table([bar], [(0.5,)]).text().endswith("50%")
    facts = fact_table([("FLOPs", "1 kFLOP"), ("bytes accessed", "2 KiB")])
    assert facts.text() == "FLOPs           1 kFLOP\nbytes accessed  2 KiB"
    assert "<tr><th>FLOPs</th><td>1 kFLOP</td></tr>" in facts.html()


def test_a_report_is_one_styled_fragment_and_the_same_text():
    report = Report(
        "tpukit-example",
        "Compiled <f>",
        [Line("f(x)", code=True), Line("careful", "warn"), Table(OPS, [("add", 1)])],
    )
    assert report.text().splitlines() == [
        "Compiled <f>",
        "  f(x)",
        "  careful",
        "  opcode  count",
        "  add         1",
    ]
    page = report.html()
    assert page.startswith("<style>.tpukit-out.tpukit-out.tpukit-example")
    assert '<div class="tpukit-out tpukit-example">' in page
    assert "<div><b>Compiled &lt;f&gt;</b></div>" in page and "<code>f(x)</code>" in page
    assert '<div class="warn">careful</div>' in page


def test_results_draw_their_tables_through_the_description():
    package = Path(tpukit.__file__).parent
    writers = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if re.search(r"<table\b", path.read_text(encoding="utf-8"))
    }
    assert writers == {"display/_table.py", "display/_html_style.py"}  # its example
