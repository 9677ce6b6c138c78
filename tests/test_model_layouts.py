"""The model maps a bank export's columns where detection cannot (issue 39): it chooses only among the readings
the file's values allow, its answer is used only where the values bear it out, and a run records which files
were read that way."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from pathlib import Path

from pipeline.config import RunConfig
from pipeline.infer.layouts import ask_layouts, layout_schema
from pipeline.ingest.layout_question import answer_profile
from pipeline.ingest.transactions import TransactionFile, read_transactions
from pipeline.output.sink import read_dataset
from pipeline.run import run_pipeline
from tests.helpers.fake_llm import FakeLLM


def _read(text: str, name: str, **kw: object) -> TransactionFile:
    data = text.encode()
    return read_transactions(data, name, hashlib.sha256(data).hexdigest(), **kw)  # type: ignore[arg-type]


# Gross, fee and net all hold amounts: which one moves the account needs reading.
NETTO = ("Buchung;Vorgang;Brutto;Gebühr;Netto;Währung\n"
         "03.03.2024;Zahlung Kunde A;100,00;-2,90;97,10;EUR\n"
         "05.03.2024;Zahlung Kunde B;250,00;-5,40;244,60;EUR\n"
         "07.03.2024;Rückerstattung;-40,00;0,00;-40,00;EUR\n")

# No header; money out and money in in two columns; a running balance in the last one.
SPLIT_WITH_BALANCE = ("02.01.2024;Supermarkt;12,40;;987,60\n"
                      "03.01.2024;Gehalt;;2500,00;3487,60\n"
                      "05.01.2024;Miete;900,00;;2587,60\n"
                      "09.01.2024;Tankstelle;61,15;;2526,45\n")


def test_ambiguous_amount_columns_become_a_question_with_only_value_allowed_options() -> None:
    tf = _read(NETTO, "umsaetze.csv")
    assert [e.error_class for e in tf.errors] == ["UnrecognisedTable"]
    assert "columns 3, 4, 5 could each hold the amount" in tf.errors[0].message
    q = tf.question
    assert q is not None
    choices = q.choices()
    assert choices["date"] == ("Buchung",)  # the one column of dates: decided, not asked
    assert choices["money"] == ("amount: Brutto", "amount: Gebühr", "amount: Netto")
    assert choices["currency"] == ("Währung", "none")
    schema = layout_schema(q)
    assert set(schema["properties"]) == set(q.asked()) and "date" not in schema["properties"]


ORDERS = ("Order Date,Order ID,UNSPSC Code,List Price Per Unit,Quantity,Item Subtotal,Item Subtotal Tax,Item Total,"
          "Currency\n"
          "01/29/16,123-4567890-1234567,01234567,$10.00,2,$20.00,$1.90,$21.90,USD\n"
          "02/03/16,123-4567890-7654321,53131608,$5.50,1,$5.50,$0.52,$6.02,USD\n"
          "02/11/16,123-4567890-1111111,44121707,$3.25,4,$13.00,$1.24,$14.24,USD\n")


def test_codes_prices_quantities_and_taxes_are_never_offered_as_the_amount() -> None:
    """Numbers that never move an account (a product code, a unit price, a quantity, a tax) are left out of the
    model's choices: only the order's subtotal or total remain to be read."""
    q = _read(ORDERS, "orders.csv").question
    assert q is not None
    assert q.choices()["money"] == ("amount: Item Subtotal", "amount: Item Total")


def test_oddly_named_layout_is_read_as_the_model_maps_it() -> None:
    q = _read(NETTO, "umsaetze.csv").question
    profile = ask_layouts(FakeLLM(layout_answer={"money": "amount: Netto", "currency": "Währung"}),
                          {"umsaetze.csv": q})["umsaetze.csv"]
    assert not isinstance(profile, str), profile
    tf = _read(NETTO, "umsaetze.csv", profiles=(profile,))
    assert not tf.errors
    assert [(r["amount"], r["currency"]) for r in tf.rows] == [
        (Decimal("97.10"), "EUR"), (Decimal("244.60"), "EUR"), (Decimal("-40.00"), "EUR")]


def test_headerless_split_columns_take_their_direction_from_the_running_balance() -> None:
    tf = _read(SPLIT_WITH_BALANCE, "konto.csv", default_currency="EUR")
    q = tf.question
    assert q is not None
    assert q.choices()["money"] == ("out: column 3 / in: column 4",)  # the balance proves which side is which
    profile = ask_layouts(FakeLLM(), {"konto.csv": q})["konto.csv"]
    assert not isinstance(profile, str), profile
    read = _read(SPLIT_WITH_BALANCE, "konto.csv", profiles=(profile,), default_currency="EUR")
    assert [r["amount"] for r in read.rows] == [Decimal("-12.40"), Decimal("2500.00"), Decimal("-900.00"),
                                                Decimal("-61.15")]


def test_headerless_split_columns_without_a_balance_are_never_given_a_direction_by_guess() -> None:
    text = "\n".join(line.rsplit(";", 1)[0] for line in SPLIT_WITH_BALANCE.splitlines()) + "\n"
    tf = _read(text, "konto.csv", default_currency="EUR")
    assert tf.question is None
    assert "columns 3, 4 could each hold the amount" in tf.errors[0].message


def test_an_answer_the_values_contradict_is_refused() -> None:
    q = _read(NETTO, "umsaetze.csv").question
    assert q is not None
    refused = answer_profile(q, {"money": "amount: Vorgang", "currency": "Währung"})  # a column of words
    assert isinstance(refused, str) and "not among what the values allow" in refused
    # dates the values read day first are never offered month first, so an answer cannot turn them round
    days = [f"{d:02d}/02/2024" for d in range(1, 13)] * 2
    days[7] = "25/02/2024"
    text = "Valuta;Omschrijving;Bedrag;Tegenrekening;Saldo\n" + "".join(
        f"{day};regel {i};-1,00;NL{i:02d}BANK;{i}\n" for i, day in enumerate(days))
    q2 = _read(text, "mutaties.csv").question
    if q2 is not None:
        assert q2.choices()["date_order"] == ("day_first",)


def test_a_run_reads_the_mapped_file_and_records_its_layout_source(tmp_path: Path, fake_model: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "umsaetze.csv").write_text(NETTO)
    (inputs / "plain.csv").write_text("Date,Amount,Currency\n2024-03-01,-5.00,EUR\n")
    cfg = RunConfig(input_dir=inputs, output_dir=tmp_path / "out", model_dir=fake_model, run_date="2024-05-01",
                    progress=False)
    llm = FakeLLM(layout_answer={"money": "amount: Netto", "currency": "Währung"})
    summary = run_pipeline(cfg, llm=llm)
    assert len(llm.layout_prompts) == 1 and "Brutto" in llm.layout_prompts[0]
    tx = read_dataset(cfg.output_dir, "transactions").to_pylist()
    assert sorted(str(r["amount"]) for r in tx if r["source_file"] == "umsaetze.csv") == ["-40.0000", "244.6000", "97.1000"]
    assert summary.manifest["inputs"]["layout_sources"] == {"umsaetze.csv": "model", "plain.csv": "detected"}
    assert summary.manifest["reconciliation"]["balanced"]
    errors = read_dataset(cfg.output_dir, "errors").to_pylist()
    assert not [e for e in errors if e["source_file"] == "umsaetze.csv"]


def test_without_model_layouts_the_error_row_stands(tmp_path: Path, fake_model: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "umsaetze.csv").write_text(NETTO)
    cfg = RunConfig(input_dir=inputs, output_dir=tmp_path / "out", model_dir=fake_model, run_date="2024-05-01",
                    progress=False, model_layouts=False)
    llm = FakeLLM()
    run_pipeline(cfg, llm=llm)
    assert not llm.layout_prompts
    errors = read_dataset(cfg.output_dir, "errors").to_pylist()
    assert [e["error_class"] for e in errors if e["source_file"] == "umsaetze.csv"] == ["UnrecognisedTable"]


def test_a_refused_mapping_is_named_in_the_files_error_row(tmp_path: Path, fake_model: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "umsaetze.csv").write_text(NETTO)
    cfg = RunConfig(input_dir=inputs, output_dir=tmp_path / "out", model_dir=fake_model, run_date="2024-05-01",
                    progress=False)
    run_pipeline(cfg, llm=FakeLLM(layout_answer={"money": "amount: Vorgang"}, constrained=False))
    errors = [e for e in read_dataset(cfg.output_dir, "errors").to_pylist() if e["source_file"] == "umsaetze.csv"]
    assert len(errors) == 1 and "the model's column mapping was not used" in errors[0]["message"]
    assert not [r for r in read_dataset(cfg.output_dir, "transactions").to_pylist()
                if r["source_file"] == "umsaetze.csv"]


# Split money columns whose names no synonym holds (Finnish deposits / withdrawals), saved as an HTML '.xls'.
SPLIT_HTML = """<html><body><table>
<tr><th>Data</th><th>Panot</th><th>Otot</th><th>Descrizione</th></tr>
<tr><td>05/03/2024</td><td></td><td>45,90</td><td>Supermercato</td></tr>
<tr><td>07/03/2024</td><td>1.800,00</td><td></td><td>Stipendio</td></tr>
<tr><td>09/03/2024</td><td></td><td>12,00</td><td>Bar</td></tr>
</table></body></html>"""


def test_a_spreadsheet_table_gets_the_same_question_and_profile() -> None:
    tf = _read(SPLIT_HTML, "movimenti.xls", default_currency="EUR")
    q = tf.question
    assert q is not None and q.delimiter is None
    assert set(q.choices()["money"]) == {"out: Panot / in: Otot", "out: Otot / in: Panot"}  # names read
    profile = ask_layouts(FakeLLM(layout_answer={"money": "out: Otot / in: Panot"}),
                          {"movimenti.xls": q})["movimenti.xls"]
    assert not isinstance(profile, str), profile
    read = _read(SPLIT_HTML, "movimenti.xls", default_currency="EUR", profiles=(profile,))
    assert not read.errors, read.errors
    assert [r["amount"] for r in read.rows] == [Decimal("-45.90"), Decimal("1800.00"), Decimal("-12.00")]


def test_italian_split_columns_are_read_without_a_question() -> None:
    """Entrate / Uscite (in / out) are among the debit and credit names: Fineco's table needs no model."""
    html = SPLIT_HTML.replace("Panot", "Entrate").replace("Otot", "Uscite")
    tf = _read(html, "movimenti.xls", default_currency="EUR")
    assert tf.question is None and not tf.errors
    assert [r["amount"] for r in tf.rows] == [Decimal("-45.90"), Decimal("1800.00"), Decimal("-12.00")]
