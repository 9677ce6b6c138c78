"""Seeded multilingual invoices and credit notes as the text PDF extraction yields, with gold fields.

For fine-tuning a real model (`finetune_smollm2.py`): English, German, French, Dutch and Spanish layouts; labels
in those languages; amounts with decimal commas, thousands separators and symbols on either side; dates with month
names; net, tax, gross and due amounts; seller and buyer blocks in either order, the seller sometimes only in the
footer; distractor numbers (customer, order, tax ids); and the ways PDF text extraction scrambles a layout (a value
printed before its label, a label column then a value column). The gold follows the documents dataset: issuer is
the seller, counterparty the buyer, reference the invoice number, date the issue date, amount the gross total
(positive on a credit note), account the seller's IBAN.

Text is generated directly rather than rendered and re-extracted: the pipeline's text for a simple PDF is its lines
in order, and the scrambles real extractors produce are modelled explicitly here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from data.tools import fake

LANGS = ("en", "de", "fr", "nl", "es")

MONTHS = {
    "en": ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"],
    "de": ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober",
           "November", "Dezember"],
    "fr": ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
           "novembre", "décembre"],
    "nl": ["januari", "februari", "maart", "april", "mei", "juni", "juli", "augustus", "september", "oktober",
           "november", "december"],
    "es": ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
           "noviembre", "diciembre"],
}

L = {  # label choices per language
    "title": {"en": ["INVOICE", "Invoice", "Tax Invoice", "TAX INVOICE"], "de": ["RECHNUNG", "Rechnung"],
              "fr": ["FACTURE", "Facture"], "nl": ["FACTUUR", "Factuur", "FACTUUR."], "es": ["FACTURA", "Factura"]},
    "credit": {"en": ["CREDIT NOTE", "Credit Note"], "de": ["GUTSCHRIFT", "Gutschrift", "Rechnungskorrektur"],
               "fr": ["AVOIR", "Facture d'avoir"], "nl": ["CREDITNOTA", "Creditnota"],
               "es": ["FACTURA RECTIFICATIVA", "Abono"]},
    "number": {"en": ["Invoice Number", "Invoice No.", "Invoice #", "Invoice no", "Invoice ID"],
               "de": ["Rechnungsnummer", "Rechnungsnr.", "Rechnung Nr.", "Rechnungs-Nr.", "Beleg-Nr."],
               "fr": ["N° de facture", "Facture n°", "Numéro de facture", "Facture N°"],
               "nl": ["Factuurnummer", "Factuurnr.", "Factuur nr."],
               "es": ["Número de factura", "Nº factura", "Factura nº", "Nº de factura"]},
    "credit_number": {"en": ["Credit note no.", "Credit Note Number"], "de": ["Gutschrift-Nr.", "Gutschriftsnummer"],
                      "fr": ["Avoir n°", "N° d'avoir"], "nl": ["Creditnota nr.", "Creditnotanummer"],
                      "es": ["Nº abono", "Número de factura rectificativa"]},
    "date": {"en": ["Invoice Date", "Date", "Date of issue", "Issue date"], "de": ["Rechnungsdatum", "Datum"],
             "fr": ["Date de facture", "Date", "Date d'émission", "Date de facturation"],
             "nl": ["Factuurdatum", "Datum"], "es": ["Fecha de factura", "Fecha", "Fecha de emisión"]},
    "due": {"en": ["Due Date", "Payment due", "Pay by"], "de": ["Fällig am", "Zahlbar bis", "Fälligkeitsdatum"],
            "fr": ["Date d'échéance", "À payer avant le", "Échéance"], "nl": ["Vervaldatum", "Te betalen voor"],
            "es": ["Fecha de vencimiento", "Vencimiento"]},
    "other_numbers": {"en": ["Customer No.", "Order No.", "PO Number", "Account number", "Order ID"],
                      "de": ["Kundennummer", "Kundennr.", "Auftragsnummer", "Bestellnr.", "Lieferschein-Nr."],
                      "fr": ["N° client", "N° de commande", "Référence client", "Numéro de dossier"],
                      "nl": ["Klantnummer", "Ordernummer", "Referentie"],
                      "es": ["Nº de cliente", "Nº de pedido", "Referencia"]},
    "buyer": {"en": ["Bill to", "Invoice to", "Customer", "Sold to", "Billing Address"],
              "de": ["Rechnungsempfänger", "Kunde", "An", "Rechnungsadresse"],
              "fr": ["Client", "Facturé à", "Destinataire", "Adresse de facturation"],
              "nl": ["Klant", "Factuuradres", "Aan"], "es": ["Cliente", "Facturar a", "Destinatario"]},
    "net": {"en": ["Subtotal", "Net amount", "Total excl. VAT", "Total net"],
            "de": ["Nettobetrag", "Zwischensumme", "Summe netto", "Gesamt netto"],
            "fr": ["Total HT", "Montant HT", "Sous-total HT"], "nl": ["Subtotaal", "Totaal excl. BTW", "Netto"],
            "es": ["Base imponible", "Subtotal", "Importe neto"]},
    "tax": {"en": ["VAT {r}%", "Tax {r}%", "Sales tax {r}%"], "de": ["MwSt. {r}%", "USt. {r}%", "zzgl. {r}% MwSt."],
            "fr": ["TVA {r}%", "TVA {r} %"], "nl": ["BTW {r}%", "BTW {r} %"], "es": ["IVA {r}%", "IVA ({r}%)"]},
    "total": {"en": ["Total", "Total due", "Amount due", "Grand Total", "Invoice total", "TOTAL AMOUNT DUE"],
              "de": ["Gesamtbetrag", "Rechnungsbetrag", "Summe brutto", "Endbetrag", "Gesamt brutto"],
              "fr": ["Total TTC", "Net à payer", "Montant TTC", "Total à payer"],
              "nl": ["Totaal", "Totaal incl. BTW", "Te betalen", "Totaalbedrag"],
              "es": ["Total", "Total factura", "Importe total", "Total a pagar"]},
    "items": {"en": ["Description", "Qty", "Unit price", "Amount"], "de": ["Beschreibung", "Menge", "Einzelpreis", "Betrag"],
              "fr": ["Désignation", "Qté", "P.U. HT", "Montant HT"], "nl": ["Omschrijving", "Aantal", "Prijs", "Bedrag"],
              "es": ["Descripción", "Cant.", "Precio", "Importe"]},
    "tel": {"en": "Phone", "de": "Tel.", "fr": "Tél", "nl": "Tel", "es": "Tel."},
    "vat_id": {"en": "VAT No.", "de": "USt-IdNr.", "fr": "N° TVA", "nl": "BTW-nr", "es": "NIF"},
    "bank": {"en": "Bank", "de": "Bankverbindung", "fr": "Banque", "nl": "Bank", "es": "Banco"},
    "thanks": {"en": ["Thank you for your business.", "Payment terms: 30 days net."],
               "de": ["Vielen Dank für Ihren Auftrag.", "Zahlbar innerhalb von 14 Tagen ohne Abzug."],
               "fr": ["Merci de votre confiance.", "Paiement à 30 jours."],
               "nl": ["Bedankt voor uw bestelling.", "Gelieve binnen 14 dagen te betalen."],
               "es": ["Gracias por su confianza.", "Pago a 30 días."]},
    "page": {"en": "Page 1 of 1", "de": "Seite 1 von 1", "fr": "Page 1/1", "nl": "Pagina 1 van 1", "es": "Página 1 de 1"},
}
ITEMS = {
    "en": ["Consulting services", "Cloud hosting", "Office chairs", "Software licence", "Maintenance", "Freight"],
    "de": ["Beratungsleistung", "Wartungsvertrag", "Bürostühle", "Softwarelizenz", "Versandkosten", "Grundgebühr"],
    "fr": ["Prestation de conseil", "Hébergement", "Abonnement mensuel", "Licence logiciel", "Frais de port"],
    "nl": ["Adviesdiensten", "Hosting", "Bureaustoelen", "Licentie", "Verzendkosten", "Abonnement"],
    "es": ["Servicios de consultoría", "Alojamiento web", "Sillas de oficina", "Licencia", "Gastos de envío"],
}
CURRENCY = {"en": ["USD", "GBP", "EUR", "USD", "INR"], "de": ["EUR", "EUR", "EUR", "CHF"], "fr": ["EUR"],
            "nl": ["EUR"], "es": ["EUR"]}
SYMBOL = {"EUR": "€", "USD": "$", "GBP": "£", "INR": "Rs", "CHF": "CHF"}
IBAN_COUNTRY = {"en": ["GB", "IE"], "de": ["DE", "AT", "CH"], "fr": ["FR", "BE"], "nl": ["NL", "BE"], "es": ["ES"]}
SELLER_FORMS = {"en": ["Ltd", "Inc.", "LLC", "plc", "Limited"], "de": ["GmbH", "AG", "GmbH & Co. KG", "KG", "e.K."],
                "fr": ["SAS", "SARL", "S.A.", "EURL"], "nl": ["B.V.", "N.V.", "V.O.F."], "es": ["S.L.", "S.A.", "S.L.U."]}
FILLER = {
    "en": ["All services are provided under our general terms and conditions, available on request.",
           "Please quote the invoice number with your payment. Late payments may incur interest at the statutory rate.",
           "Goods remain our property until paid in full. Questions about this invoice? Contact our billing team."],
    "de": ["Es gelten unsere Allgemeinen Geschäftsbedingungen. Bitte geben Sie bei Zahlung die Rechnungsnummer an.",
           "Die Ware bleibt bis zur vollständigen Bezahlung unser Eigentum.",
           "Leistungszeitraum entspricht dem Rechnungsdatum, sofern nicht anders angegeben."],
    "fr": ["Tout retard de paiement entraînera des pénalités au taux légal. Aucun escompte pour paiement anticipé.",
           "Indemnité forfaitaire pour frais de recouvrement : 40 €. TVA acquittée sur les encaissements."],
    "nl": ["Op al onze leveringen zijn de algemene voorwaarden van toepassing.",
           "Vermeld bij betaling altijd het factuurnummer. Printen? Niet nodig."],
    "es": ["Según las condiciones generales de venta. El pago deberá realizarse en el plazo indicado.",
           "Inscrita en el Registro Mercantil. Conserve esta factura como justificante."],
}
REGISTRY_LINE = {"en": "Registered in England No. {n} · Directors: {p}", "de": "Amtsgericht {c} HRB {n} · Geschäftsführer: {p}",
                 "fr": "RCS {c} B {n} · Gérant : {p}", "nl": "KvK {c} {n} · Directeur: {p}",
                 "es": "Registro Mercantil de {c}, hoja {n} · Administrador: {p}"}
NAME_WORDS = ["Nordlicht", "Blauwal", "Soleil", "Vega", "Tulp", "Kronos", "Alba", "Brisa", "Maple", "Quantum",
              "Helios", "Duna", "Polder", "Rhein", "Loire", "Sierra", "Thames", "Fenix", "Lumière", "Zuid"]


@dataclass
class Example:
    text: str
    gold: dict[str, object]
    lang: str


def _date(rng: random.Random, d: date, lang: str) -> str:
    m = MONTHS[lang][d.month - 1]
    styles = {
        "en": [f"{m} {d.day}, {d.year}", f"{d.day} {m} {d.year}", f"{d.day:02d}/{d.month:02d}/{d.year}",
               f"{d.month:02d}/{d.day:02d}/{d.year}", d.isoformat(), f"{m[:3]} {d.day}, {d.year}",
               f"{d.day:02d}-{m[:3]}-{d.year}", f"{m} {d.day} , {d.year}"],
        "de": [f"{d.day:02d}.{d.month:02d}.{d.year}", f"{d.day}. {m} {d.year}", f"{d.day:02d}.{d.month:02d}.{d.year}",
               d.isoformat()],
        "fr": [f"{d.day:02d}/{d.month:02d}/{d.year}", f"{d.day} {m} {d.year}", f"{d.day:02d} {m.capitalize()} {d.year}",
               f"{d.day:02d}.{d.month:02d}.{d.year}"],
        "nl": [f"{d.day:02d}-{d.month:02d}-{d.year}", f"{d.day} {m} {d.year}", f"{d.day:02d}.{d.month:02d}.{d.year}",
               d.isoformat()],
        "es": [f"{d.day:02d}/{d.month:02d}/{d.year}", f"{d.day} de {m} de {d.year}", f"{d.day:02d}-{d.month:02d}-{d.year}"],
    }
    return rng.choice(styles[lang])


def _amount_style(rng: random.Random, lang: str) -> str:
    return {"en": rng.choice(["en", "en", "plain"]), "de": "de", "fr": rng.choice(["fr", "de", "plain"]),
            "nl": rng.choice(["de", "en"]), "es": "de"}[lang]


def _money(rng: random.Random, value: Decimal, ccy: str, style: str, lang: str) -> str:
    s = fake.fmt_amount(value, style)
    sym = SYMBOL[ccy] if rng.random() < 0.7 else ccy
    if sym in ("$", "£") or (sym == "€" and lang in ("nl", "en") and rng.random() < 0.6) or sym in ("Rs",):
        return f"{sym}{'' if sym in ('$', '£') else ' '}{s}"
    if rng.random() < 0.25:
        return s  # the currency only in a column header
    return f"{s} {sym}" if sym == "€" or rng.random() < 0.5 else f"{sym} {s}"


def _seller(rng: random.Random, lang: str) -> str:
    r = rng.random()
    if r < 0.45:
        return f"{rng.choice(NAME_WORDS)} {rng.choice(fake.COMPANY_MIDS)} {rng.choice(SELLER_FORMS[lang])}"
    if r < 0.7:
        return fake.company(rng)
    if r < 0.85:
        return f"{rng.choice(NAME_WORDS)}{rng.choice(['tech', 'soft', 'net', 'print', 'trans'])} {rng.choice(SELLER_FORMS[lang])}"
    return rng.choice(NAME_WORDS).upper() + rng.choice(["", " " + rng.choice(SELLER_FORMS[lang]).upper()])


def _number(rng: random.Random, d: date) -> str:
    r = rng.random()
    if r < 0.3:
        return str(rng.randint(10_000, 999_999_999))
    if r < 0.55:
        return f"{rng.choice(['INV', 'RE', 'FA', 'F', 'FAC', 'R'])}-{d.year}-{rng.randint(1, 99999):05d}"
    if r < 0.75:
        return f"{rng.choice(['INV', 'RE', 'FV'])}/{d.year}/{d.month:02d}/{rng.randint(1, 9999):04d}"
    if r < 0.9:
        return f"{d.year}{rng.randint(1000, 99999)}"
    return f"{rng.choice(['A', 'B', 'C', 'K'])}{rng.randint(100, 99999)}{rng.choice(['', '-1', '-2'])}"


def _kv(rng: random.Random, label: str, value: str, style: str) -> list[str]:
    if style == "colon":
        return [f"{label}: {value}"]
    if style == "space":
        return [f"{label} {value}"]
    if style == "lines":
        return [label, value]
    return [f"{value}{label}:"]  # glued before its label, as right-aligned columns often extract


def invoice(rng: random.Random) -> Example:
    lang = rng.choice(LANGS)
    credit = rng.random() < 0.15
    ccy = rng.choice(CURRENCY[lang])
    style = _amount_style(rng, lang)
    seller = _seller(rng, lang)
    buyer = fake.company(rng) if rng.random() < 0.6 else fake.person(rng)
    d = fake.rand_date(rng, start=date(2012, 1, 1), days=5000)
    number = _number(rng, d)
    iban = fake.iban(rng, rng.choice(IBAN_COUNTRY[lang]))
    kv_style = rng.choice(["colon", "colon", "space", "lines", "glued"])

    rows, net = [], Decimal(0)
    for _ in range(rng.randint(1, 6) if rng.random() < 0.6 else rng.randint(6, 14)):
        qty = rng.randint(1, 9)
        unit = fake.money(rng, 1, 1500)
        net += unit * qty
        rows.append(f"{rng.choice(ITEMS[lang])} {qty} {_money(rng, unit, ccy, style, lang)} "
                    f"{_money(rng, unit * qty, ccy, style, lang)}")
    rate = rng.choice({"en": [0, 5, 10, 15, 20], "de": [7, 19], "fr": [5.5, 10, 20], "nl": [9, 21],
                       "es": [10, 21]}[lang])
    tax = (net * Decimal(str(rate)) / 100).quantize(Decimal("0.01"))
    total = net + tax
    sign = -1 if credit and rng.random() < 0.6 else 1

    s_street, s_city = fake.address(rng)
    b_street, b_city = fake.address(rng)
    printed_seller = seller if rng.random() < 0.8 else seller.upper()
    seller_block = [printed_seller, s_street, s_city]
    words = printed_seller.split()
    if len(words) >= 3 and rng.random() < 0.15:  # a long name wrapped onto two lines
        cut = rng.randint(1, len(words) - 1)
        seller_block = [" ".join(words[:cut]), " ".join(words[cut:]), s_street, s_city]
    if rng.random() < 0.6:
        seller_block.append(f"{L['tel'][lang]} +{rng.randint(30, 49)} {rng.randint(100, 999)} {rng.randint(1000, 99999)}")
    if rng.random() < 0.5:
        seller_block.append(f"{L['vat_id'][lang]} {iban[:2]}{rng.randint(100_000_000, 999_999_999)}")
    buyer_block = ([f"{rng.choice(L['buyer'][lang])}:"] if rng.random() < 0.6 else []) + [buyer, b_street, b_city]

    meta: list[str] = []
    number_label = rng.choice(L["credit_number" if credit and rng.random() < 0.5 else "number"][lang])
    due = d + timedelta(days=rng.choice([7, 14, 30, 60]))
    fields = [(number_label, number), (rng.choice(L["date"][lang]), _date(rng, d, lang))]
    if rng.random() < 0.6:
        fields.append((rng.choice(L["due"][lang]), _date(rng, due, lang)))
    for _ in range(rng.choice([0, 1, 1, 2])):
        fields.append((rng.choice(L["other_numbers"][lang]), str(rng.randint(1000, 99_999_999))))
    if rng.random() < 0.3:
        fields.append((rng.choice(L["other_numbers"][lang]), _date(rng, d - timedelta(days=rng.randint(1, 20)), lang)))
    rng.shuffle(fields)
    fields.sort(key=lambda f: f[0] != number_label and rng.random() < 0.5)
    if kv_style == "lines" and rng.random() < 0.4:  # a label column, then the value column
        meta += [f[0] for f in fields] + [f[1] for f in fields]
    else:
        for label, value in fields:
            meta += _kv(rng, label, value, kv_style)

    totals = [f"{rng.choice(L['net'][lang])} {_money(rng, sign * net, ccy, style, lang)}",
              f"{rng.choice(L['tax'][lang]).format(r=rate)} {_money(rng, sign * tax, ccy, style, lang)}",
              f"{rng.choice(L['total'][lang])} {_money(rng, sign * total, ccy, style, lang)}"]
    if rng.random() < 0.15:
        paid = (total * Decimal(rng.choice(["0.5", "0.3"]))).quantize(Decimal("0.01"))
        totals.append(f"{rng.choice(['Paid', 'Anzahlung', 'Acompte', 'Betaald', 'Pagado'])} "
                      f"{_money(rng, paid, ccy, style, lang)}")
        totals.append(f"{rng.choice(L['due'][lang])} {_money(rng, total - paid, ccy, style, lang)}")
    bank_lines = [f"{L['bank'][lang]}: {fake.company(rng, 'bank')}", f"IBAN {fake.show_iban(rng, iban)}",
                  f"BIC {''.join(rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ') for _ in range(6))}2X"]
    if rng.random() < 0.3:
        bank_lines = [" ".join(bank_lines)]
    if rng.random() < 0.15:
        bank_lines[0] = bank_lines[0].replace("IBAN ", "") if len(bank_lines) == 1 else bank_lines[0]
        bank_lines = [f"{fake.show_iban(rng, iban).replace(' ', '')}IBAN"] + bank_lines[2:]

    title = rng.choice(L["credit" if credit else "title"][lang])
    header = seller_block + [""] + buyer_block if rng.random() < 0.6 else buyer_block + [""] + seller_block
    seller_only_in_footer = rng.random() < 0.15
    if seller_only_in_footer:
        header = buyer_block
        printed_seller = seller
    items_header = " ".join(L["items"][lang])
    body = ([title] + meta if rng.random() < 0.5 else meta + [title])
    lines = header + [""] + body + ["", items_header] + rows + totals + [""] + bank_lines
    lines.append(rng.choice(L["thanks"][lang]))
    if seller_only_in_footer or rng.random() < 0.4:
        lines.append(f"{seller} · {s_street} · {s_city}" if rng.random() < 0.5 else f"{seller} - {s_city}")
    for para in rng.sample(FILLER[lang], k=rng.randint(0, len(FILLER[lang]))):
        lines.append(para)
    if rng.random() < 0.5:
        lines.append(REGISTRY_LINE[lang].format(n=rng.randint(10000, 999999), p=fake.person(rng),
                                                c=fake.address(rng)[1].split()[1].rstrip(",")))
    if rng.random() < 0.4:
        lines.append(L["page"][lang])
    text = "\n".join(lines)
    gold = {"doc_type": "invoice", "issuer": printed_seller, "counterparty": buyer, "reference": number,
            "date": d.isoformat(), "currency": ccy, "amount": fake.gold_amount(total), "account": iban}
    return Example(text, gold, lang)
