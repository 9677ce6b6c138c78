"""Seeded canonical transactions for synthetic accounts, with monitoring patterns injected.

An account gets recurring counterparties (salary, rent, utilities, shops) for a few months;
some months get injected patterns: large cash movements, structuring-like round cash
deposits just under 10,000, large first-time counterparties and foreign-currency payments.
"""

import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pyarrow as pa

from data.tools import fake
from schemas.transactions import TRANSACTION_ARROW_SCHEMA


@dataclass(frozen=True)
class Tx:
    account: str
    timestamp: datetime
    amount: Decimal
    currency: str
    counterparty: str | None
    description: str | None


SHOPS = ["Supermarket", "Pharmacy", "Bookshop", "Fuel Station", "Electronics", "Bakery", "Hardware Store",
         "Restaurant", "Cinema", "Online Store", "Taxi", "Airline", "Hotel", "Telecom", "Utility Co"]


def account_transactions(rng: random.Random, months: int | None = None,
                         start: datetime | None = None) -> list[Tx]:
    """All transactions of one synthetic account over a few consecutive months."""
    acct = fake.iban(rng)
    ccy = rng.choice(["EUR", "EUR", "EUR", "USD", "GBP", "CHF", "SEK", "PLN"])
    months = months or rng.randint(1, 4)
    start = start or datetime(rng.randint(2021, 2025), rng.randint(1, 12), 1, tzinfo=timezone.utc)
    business = rng.random() < 0.35
    employer = fake.company(rng)
    landlord = fake.company(rng) if rng.random() < 0.5 else fake.person(rng)
    regulars = [fake.company(rng) for _ in range(rng.randint(3, 8))]
    shops = [f"{rng.choice(SHOPS)} {fake.company(rng).split()[0]}" for _ in range(rng.randint(4, 10))]
    salary = fake.money(rng, 1800, 4800)
    rent = fake.money(rng, 500, 2400)
    out: list[Tx] = []
    for m in range(months):
        y, mo = start.year + (start.month - 1 + m) // 12, (start.month - 1 + m) % 12 + 1
        base = datetime(y, mo, 1, tzinfo=timezone.utc)

        def at(day: int) -> datetime:
            return base + timedelta(days=min(day, 27), hours=rng.randint(6, 21), minutes=rng.randint(0, 59),
                                    seconds=rng.randint(0, 59))

        def add(day: int, amount: Decimal, cp: str | None, desc: str | None, cur: str = ccy) -> None:
            out.append(Tx(acct, at(day), amount, cur, cp, desc))

        if business:
            for _ in range(rng.randint(4, 14)):
                add(rng.randint(0, 27), fake.money(rng, 200, 4900), rng.choice(regulars),
                    rng.choice(["Invoice payment", "SEPA credit", "Transfer"]))
            for _ in range(rng.randint(3, 10)):
                add(rng.randint(0, 27), -fake.money(rng, 50, 4500), rng.choice(regulars + shops),
                    rng.choice(["Supplier payment", "Direct debit", "Card payment"]))
        else:
            add(rng.randint(24, 27), salary, employer, "Salary")
            add(rng.randint(0, 3), -rent, landlord, "Rent standing order")
            for _ in range(rng.randint(3, 16)):
                add(rng.randint(0, 27), -fake.money(rng, 3, 400), rng.choice(shops), "Card payment")
        if rng.random() < 0.3:
            add(rng.randint(0, 27), -Decimal(rng.choice([20, 50, 100, 200, 300])), None, "ATM withdrawal")
        if rng.random() < 0.25:
            add(rng.randint(0, 27), fake.money(rng, 50, 3000), None, "Cash deposit")
        # injected monitoring patterns
        if rng.random() < 0.22:
            for _ in range(rng.randint(1, 2)):
                sign = 1 if rng.random() < 0.6 else -1
                add(rng.randint(0, 27), sign * fake.money(rng, 10000, 90000), None,
                    "Cash deposit" if sign > 0 else "Cash withdrawal")
        if rng.random() < 0.2:
            for _ in range(rng.randint(1, 4)):
                add(rng.randint(0, 27), Decimal(rng.randrange(9000, 10000, 100)), None,
                    rng.choice(["Cash deposit", "CASH DEPOSIT branch", "Cash in"]))
        if rng.random() < 0.25:
            for _ in range(rng.randint(1, 3)):
                sign = 1 if rng.random() < 0.5 else -1
                add(rng.randint(0, 27), sign * fake.money(rng, 5000, 60000), fake.company(rng),
                    rng.choice(["Transfer", "Wire transfer", "SEPA credit", "Payment"]))
        if rng.random() < 0.2:
            other = rng.choice([c for c in ("EUR", "USD", "GBP", "CHF", "JPY") if c != ccy])
            for _ in range(rng.randint(1, 3)):
                add(rng.randint(0, 27), -fake.money(rng, 10, 3000), rng.choice(shops + regulars),
                    "Card payment abroad", cur=other)
    out.sort(key=lambda t: t.timestamp)
    return out


def to_table(txs: list[Tx], source_file: str = "generated") -> pa.Table:
    """Canonical Arrow table (TRANSACTION_ARROW_SCHEMA); rows numbered in list order."""
    return pa.table(
        {
            "account": [t.account for t in txs],
            "timestamp": [t.timestamp for t in txs],
            "amount": [t.amount.quantize(Decimal("0.0001")) for t in txs],
            "currency": [t.currency for t in txs],
            "counterparty": [t.counterparty for t in txs],
            "description": [t.description for t in txs],
            "source_file": [source_file] * len(txs),
            "source_row": list(range(1, len(txs) + 1)),
        },
        schema=TRANSACTION_ARROW_SCHEMA,
    )
