"""Longer, realistic source files generated from a small entity description.

A record type, its validation, an in-memory store, queries and a small CLI: the kind of file that
whole-file edits and agent sessions work on. The number of fields drawn sets the length.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from tools.promptgen.model import snake_case


@dataclass(frozen=True)
class Entity:
    name: str  # CamelCase
    plural: str  # snake_case plural
    fields: tuple[tuple[str, str], ...]  # (name, kind) with kind in str|int|float|bool|date
    statuses: tuple[str, ...]


def _entity(name: str, plural: str, fields: str, statuses: str) -> Entity:
    """An Entity from "name:kind name:kind ..." and "status status ..."."""
    pairs = tuple((f.partition(":")[0], f.partition(":")[2]) for f in fields.split())
    return Entity(name, plural, pairs, tuple(statuses.split()))


ENTITIES: tuple[Entity, ...] = (
    _entity("Invoice", "invoices",
            "customer:str amount_cents:int currency:str due_date:date paid:bool notes:str "
            "tax_rate:float po_number:str",
            "draft sent paid void"),
    _entity("Shipment", "shipments",
            "tracking_code:str carrier:str weight_kg:float destination:str shipped_on:date "
            "insured:bool parcels:int recipient:str",
            "pending in_transit delivered lost"),
    _entity("Ticket", "tickets",
            "title:str reporter:str assignee:str priority:int opened_on:date blocking:bool "
            "component:str estimate_h:float",
            "open in_progress resolved closed"),
    _entity("Booking", "bookings",
            "guest:str room:str nights:int check_in:date rate_cents:int breakfast:bool "
            "channel:str adults:int",
            "held confirmed checked_in cancelled"),
    _entity("Employee", "employees",
            "full_name:str email:str team:str salary_cents:int hired_on:date remote:bool "
            "level:int manager:str",
            "active on_leave terminated"),
    _entity("Subscription", "subscriptions",
            "account:str plan:str seats:int monthly_cents:int renews_on:date auto_renew:bool "
            "discount:float region:str",
            "trial active past_due cancelled"),
    _entity("Reading", "readings",
            "sensor_id:str site:str celsius:float humidity:float taken_on:date calibrated:bool "
            "battery_pct:int firmware:str",
            "ok suspect rejected"),
    _entity("Order", "orders",
            "customer_email:str total_cents:int items:int placed_on:date gift:bool coupon:str "
            "shipping_cents:int country:str",
            "new paid shipped refunded"),
    _entity("Build", "builds",
            "repo:str branch:str commit:str duration_s:float started_on:date cached:bool "
            "tests_run:int runner:str",
            "queued running passed failed"),
    _entity("Vehicle", "vehicles",
            "vin:str make:str model:str mileage_km:int registered_on:date electric:bool "
            "fuel_l_per_100km:float depot:str",
            "available rented maintenance retired"),
    _entity("Patient", "patients",
            "name:str ward:str age:int admitted_on:date allergies:str insured:bool "
            "weight_kg:float doctor:str",
            "admitted discharged transferred"),
    _entity("Listing", "listings",
            "address:str city:str price_cents:int bedrooms:int listed_on:date furnished:bool "
            "area_m2:float agent:str",
            "draft published under_offer sold"),
)

_PY_TYPE = {"str": "str", "int": "int", "float": "float", "bool": "bool", "date": "date"}
_PY_CONVERT = {"str": "str({})", "int": "int({})", "float": "float({})", "bool": "bool({})",
               "date": "date.fromisoformat(str({}))"}


@dataclass(frozen=True)
class _Shape:
    """One generated module: the entity, the fields drawn for it, and the names derived."""

    ent: Entity
    fields: tuple[tuple[str, str], ...]

    @property
    def var(self) -> str:  # the variable name of one record in the generated code
        return snake_case(self.ent.name)

    @property
    def words(self) -> str:  # the plural as prose
        return self.ent.plural.replace("_", " ")

    def of_kind(self, *kinds: str) -> list[str]:
        return [f for f, k in self.fields if k in kinds]


def python_entity_module(ent: Entity, rng: random.Random) -> str:
    """A store-and-query module for one record type; its length grows with the field count."""
    shape = _Shape(ent, ent.fields[:rng.randint(4, len(ent.fields))])
    return "\n".join([*_py_head(shape), _py_record(shape), _py_validate(shape),
                      _py_store(shape, rng), _py_summary(shape), _py_main(shape)])


def _py_head(m: _Shape) -> list[str]:
    cls = m.ent.name
    return [
        f'"""Storage, validation and queries for {m.words}.\n\n'
        f"{cls} records are validated when added and kept in memory, keyed by id. The module\n"
        "also reads and writes JSON lines and CSV, and has a small command-line report.\n"
        '"""\n',
        "from __future__ import annotations\n",
        "import argparse\nimport csv\nimport io\nimport json\nimport sys\n"
        "from collections import Counter\nfrom dataclasses import asdict, dataclass, replace\n"
        + ("from datetime import date\n" if m.of_kind("date") else "")
        + "from pathlib import Path\nfrom typing import Iterator\n",
        f"STATUSES: tuple[str, ...] = ({', '.join(json.dumps(s) for s in m.ent.statuses)})\n",
        f"\nclass {cls}Error(ValueError):\n"
        '    """A record is invalid or conflicts with the store."""\n',
    ]


def _py_record(m: _Shape) -> str:
    cls, err, e = m.ent.name, f"{m.ent.name}Error", m.var
    body = ["    id: int"]
    body += [f"    {f}: {_PY_TYPE[k]}" for f, k in m.fields]
    body.append(f'    status: str = "{m.ent.statuses[0]}"')
    to_dict = ["    def to_dict(self) -> dict[str, object]:", "        data = asdict(self)"]
    to_dict += [f'        data["{f}"] = self.{f}.isoformat()' for f in m.of_kind("date")]
    to_dict.append("        return data")
    from_dict = [
        "    @classmethod",
        f"    def from_dict(cls, data: dict[str, object]) -> {cls}:",
        "        try:",
        "            return cls(",
        '                id=int(data["id"]),',
    ]
    from_dict += [f"                {f}={_PY_CONVERT[k].format(f'data[{json.dumps(f)}]')},"
                  for f, k in m.fields]
    from_dict += [
        f'                status=str(data.get("status", "{m.ent.statuses[0]}")),',
        "            )",
        "        except (KeyError, TypeError, ValueError) as exc:",
        f'            raise {err}(f"bad {e} record {{data!r}}: {{exc}}") from None',
    ]
    return ("\n@dataclass(frozen=True)\nclass " + cls + ":\n" + "\n".join(body) + "\n\n"
            + "\n".join(to_dict) + "\n\n" + "\n".join(from_dict) + "\n")


def _py_validate(m: _Shape) -> str:
    e = m.var
    checks = [f"def validate({e}: {m.ent.name}) -> list[str]:",
              '    """Every problem with a record, as readable sentences (empty when valid)."""',
              "    problems: list[str] = []",
              f"    if {e}.id < 1:",
              f'        problems.append(f"id must be positive, got {{{e}.id}}")']
    for f in m.of_kind("str"):
        checks += [f"    if not {e}.{f}.strip():",
                   f'        problems.append("{f} must not be empty")']
    for f in m.of_kind("int", "float"):
        checks += [f"    if {e}.{f} < 0:",
                   f'        problems.append(f"{f} must not be negative, got {{{e}.{f}}}")']
    checks += [f"    if {e}.status not in STATUSES:",
               f"        problems.append(f\"unknown status {{{e}.status!r}}; expected one of "
               "{', '.join(STATUSES)}\")",
               "    return problems"]
    return "\n" + "\n".join(checks) + "\n"


def _py_store(m: _Shape, rng: random.Random) -> str:
    cls, err, e, store = m.ent.name, f"{m.ent.name}Error", m.var, f"{m.ent.name}Store"
    methods = [
        f"class {store}:",
        f'    """In-memory {m.words} keyed by id."""',
        "",
        "    def __init__(self) -> None:",
        f"        self._items: dict[int, {cls}] = {{}}",
        "",
        "    def __len__(self) -> int:",
        "        return len(self._items)",
        "",
        f"    def __iter__(self) -> Iterator[{cls}]:",
        "        return iter(sorted(self._items.values(), key=lambda item: item.id))",
        "",
        f"    def add(self, {e}: {cls}) -> None:",
        f"        problems = validate({e})",
        "        if problems:",
        f'            raise {err}(f"{e} {{{e}.id}}: " + "; ".join(problems))',
        f"        if {e}.id in self._items:",
        f'            raise {err}(f"{e} {{{e}.id}} already exists")',
        f"        self._items[{e}.id] = {e}",
        "",
        f"    def get(self, item_id: int) -> {cls}:",
        "        try:",
        "            return self._items[item_id]",
        "        except KeyError:",
        f'            raise {err}(f"no {e} with id {{item_id}}") from None',
        "",
        f"    def update(self, item_id: int, **changes: object) -> {cls}:",
        "        updated = replace(self.get(item_id), **changes)  # type: ignore[arg-type]",
        "        problems = validate(updated)",
        "        if problems:",
        f'            raise {err}(f"{e} {{item_id}}: " + "; ".join(problems))',
        "        self._items[item_id] = updated",
        "        return updated",
        "",
        f"    def remove(self, item_id: int) -> {cls}:",
        "        return self._items.pop(item_id, None) or self.get(item_id)",
        "",
        f"    def with_status(self, status: str) -> list[{cls}]:",
        "        if status not in STATUSES:",
        f'            raise {err}(f"unknown status {{status!r}}")',
        "        return [item for item in self if item.status == status]",
        "",
        "    def count_by_status(self) -> dict[str, int]:",
        "        counts = Counter(item.status for item in self)",
        "        return {status: counts.get(status, 0) for status in STATUSES}",
    ]
    methods += _py_queries(m, rng)
    methods += _py_io(m)
    return "\n" + "\n".join(methods) + "\n"


def _py_queries(m: _Shape, rng: random.Random) -> list[str]:
    """Finders, totals and a date range: the part of the store that grows with the fields."""
    cls, err = m.ent.name, f"{m.ent.name}Error"
    strs = m.of_kind("str")
    methods: list[str] = []
    for f in strs[:rng.randint(1, max(1, len(strs)))]:
        methods += ["", f"    def find_by_{f}(self, value: str) -> list[{cls}]:",
                    "        needle = value.strip().lower()",
                    f"        return [item for item in self if item.{f}.lower() == needle]"]
    for f in m.of_kind("int", "float"):
        methods += ["", f"    def total_{f}(self, status: str | None = None) -> float:",
                    "        items = self if status is None else self.with_status(status)",
                    f"        return sum(item.{f} for item in items)"]
    for f in m.of_kind("date")[:1]:
        methods += ["", f"    def between(self, start: date, end: date) -> list[{cls}]:",
                    f'        """Records whose {f} falls in [start, end]."""',
                    "        if start > end:",
                    f'            raise {err}("start must not be after end")',
                    f"        return [item for item in self if start <= item.{f} <= end]"]
    return methods


def _py_io(m: _Shape) -> list[str]:
    cls, err = m.ent.name, f"{m.ent.name}Error"
    return [
        "",
        "    def to_csv(self) -> str:",
        "        buffer = io.StringIO()",
        f"        columns = [\"id\", {', '.join(repr(f) for f, _ in m.fields)}, \"status\"]",
        "        writer = csv.DictWriter(buffer, fieldnames=columns)",
        "        writer.writeheader()",
        "        for item in self:",
        "            writer.writerow(item.to_dict())",
        "        return buffer.getvalue()",
        "",
        "    @classmethod",
        f"    def from_json_lines(cls, text: str) -> {cls}Store:",
        "        store = cls()",
        "        for line_no, line in enumerate(text.splitlines(), start=1):",
        "            if not line.strip():",
        "                continue",
        "            try:",
        f"                store.add({cls}.from_dict(json.loads(line)))",
        f"            except (json.JSONDecodeError, {err}) as exc:",
        f'                raise {err}(f"line {{line_no}}: {{exc}}") from None',
        "        return store",
    ]


def _py_summary(m: _Shape) -> str:
    e, store = m.var, f"{m.ent.name}Store"
    report = [f"def summary({e}_store: {store}) -> str:",
              '    """A short plain-text report: counts per status and totals."""',
              f'    lines = [f"{m.words}: {{len({e}_store)}}"]',
              f"    for status, count in {e}_store.count_by_status().items():",
              '        lines.append(f"  {status:<12} {count:>6}")']
    for f in m.of_kind("int", "float")[:3]:
        report.append(f'    lines.append(f"total {f}: {{{e}_store.total_{f}():,.2f}}")')
    report.append('    return "\\n".join(lines)')
    return "\n" + "\n".join(report) + "\n"


def _py_main(m: _Shape) -> str:
    e, store, err = m.var, f"{m.ent.name}Store", f"{m.ent.name}Error"
    main = [
        "def main(argv: list[str] | None = None) -> int:",
        "    parser = argparse.ArgumentParser(description=\"Report on "
        f'{m.words} stored as JSON lines.")',
        '    parser.add_argument("path", type=Path, help="JSON lines file, one record per line")',
        '    parser.add_argument("--status", choices=STATUSES, help="only list records with '
        'this status")',
        '    parser.add_argument("--csv", action="store_true", help="print CSV instead of the '
        'report")',
        "    args = parser.parse_args(argv)",
        "    try:",
        f"        {e}_store = {store}.from_json_lines(args.path.read_text())",
        f"    except (OSError, {err}) as exc:",
        '        print(f"error: {exc}", file=sys.stderr)',
        "        return 2",
        "    if args.csv:",
        f"        print({e}_store.to_csv(), end=\"\")",
        "    elif args.status:",
        f"        for item in {e}_store.with_status(args.status):",
        "            print(json.dumps(item.to_dict()))",
        "    else:",
        f"        print(summary({e}_store))",
        "    return 0",
        "",
        "",
        'if __name__ == "__main__":',
        "    raise SystemExit(main())",
    ]
    return "\n" + "\n".join(main) + "\n"


_GO_TYPE = {"str": "string", "int": "int64", "float": "float64", "bool": "bool",
            "date": "time.Time"}
_GO_IMPORTS = ("encoding/json", "errors", "fmt", "net/http", "sort", "strconv", "strings", "sync",
               "time")


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def go_entity_module(ent: Entity, rng: random.Random, package: str) -> str:
    """A Go store with validation and an HTTP handler for one record type."""
    shape = _Shape(ent, ent.fields[:rng.randint(4, len(ent.fields))])
    recv = ent.name[0].lower()
    lines = [*_go_types(shape, package), *_go_validate(shape, recv), *_go_store(shape, recv),
             *_go_totals(shape, recv), *_go_handler(shape, recv)]
    return "\n".join(lines)


def _go_types(m: _Shape, package: str) -> list[str]:
    cls = m.ent.name
    lines = [
        f"// Package {package} stores {m.words} in memory and serves them over HTTP.",
        f"package {package}",
        "",
        "import (",
        *(f'\t"{name}"' for name in _GO_IMPORTS),
        ")",
        "",
        f"// {cls}Statuses lists the valid values of {cls}.Status.",
        f"var {cls}Statuses = []string{{{', '.join(json.dumps(s) for s in m.ent.statuses)}}}",
        "",
        f"// ErrNotFound is returned when no {cls.lower()} has the requested id.",
        "var ErrNotFound = errors.New(\"not found\")",
        "",
        f"// {cls} is one record.",
        f"type {cls} struct {{",
        '\tID     int64  `json:"id"`',
    ]
    lines += [f'\t{_camel(f)} {_GO_TYPE[k]} `json:"{f}"`' for f, k in m.fields]
    return [*lines, '\tStatus string `json:"status"`', "}", ""]


def _go_validate(m: _Shape, recv: str) -> list[str]:
    cls = m.ent.name
    lines = ["// Validate reports every problem with the record.",
             f"func ({recv} {cls}) Validate() error {{",
             "\tvar problems []string",
             f"\tif {recv}.ID < 1 {{",
             '\t\tproblems = append(problems, fmt.Sprintf("id must be positive, got %d", '
             f"{recv}.ID))",
             "\t}"]
    for f in m.of_kind("str"):
        lines += [f"\tif strings.TrimSpace({recv}.{_camel(f)}) == \"\" {{",
                  f'\t\tproblems = append(problems, "{f} must not be empty")', "\t}"]
    for f in m.of_kind("int", "float"):
        lines += [f"\tif {recv}.{_camel(f)} < 0 {{",
                  f'\t\tproblems = append(problems, "{f} must not be negative")', "\t}"]
    return [*lines, "\tvalid := false", f"\tfor _, s := range {cls}Statuses {{",
            f"\t\tif s == {recv}.Status {{", "\t\t\tvalid = true", "\t\t}", "\t}",
            "\tif !valid {",
            f'\t\tproblems = append(problems, fmt.Sprintf("unknown status %q", {recv}.Status))',
            "\t}", "\tif len(problems) > 0 {",
            f'\t\treturn fmt.Errorf("{cls.lower()} %d: %s", {recv}.ID, '
            'strings.Join(problems, "; "))',
            "\t}", "\treturn nil", "}", ""]


def _go_store(m: _Shape, recv: str) -> list[str]:
    cls, name = m.ent.name, m.ent.name.lower()
    return [f"// Store keeps {m.words} keyed by id; safe for concurrent use.",
            "type Store struct {", "\tmu    sync.RWMutex", f"\titems map[int64]{cls}", "}", "",
            "// NewStore returns an empty store.",
            "func NewStore() *Store {", f"\treturn &Store{{items: make(map[int64]{cls})}}", "}",
            "",
            "// Add validates and inserts a record.",
            f"func (s *Store) Add({recv} {cls}) error {{",
            f"\tif err := {recv}.Validate(); err != nil {{", "\t\treturn err", "\t}",
            "\ts.mu.Lock()", "\tdefer s.mu.Unlock()",
            f"\tif _, exists := s.items[{recv}.ID]; exists {{",
            f'\t\treturn fmt.Errorf("{name} %d already exists", {recv}.ID)', "\t}",
            f"\ts.items[{recv}.ID] = {recv}", "\treturn nil", "}", "",
            "// Get returns the record with the given id.",
            f"func (s *Store) Get(id int64) ({cls}, error) {{",
            "\ts.mu.RLock()", "\tdefer s.mu.RUnlock()",
            f"\t{recv}, ok := s.items[id]", "\tif !ok {",
            f'\t\treturn {cls}{{}}, fmt.Errorf("{name} %d: %w", id, ErrNotFound)', "\t}",
            f"\treturn {recv}, nil", "}", "",
            "// List returns records sorted by id, optionally filtered by status.",
            f"func (s *Store) List(status string) []{cls} {{",
            "\ts.mu.RLock()", "\tdefer s.mu.RUnlock()",
            f"\tout := make([]{cls}, 0, len(s.items))",
            f"\tfor _, {recv} := range s.items {{",
            f"\t\tif status == \"\" || {recv}.Status == status {{",
            f"\t\t\tout = append(out, {recv})", "\t\t}", "\t}",
            "\tsort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })",
            "\treturn out", "}", ""]


def _go_totals(m: _Shape, recv: str) -> list[str]:
    lines: list[str] = []
    for f in m.of_kind("int", "float")[:2]:
        lines += [f"// Total{_camel(f)} sums {f} over all records.",
                  f"func (s *Store) Total{_camel(f)}() float64 {{",
                  "\ts.mu.RLock()", "\tdefer s.mu.RUnlock()", "\tvar total float64",
                  f"\tfor _, {recv} := range s.items {{",
                  f"\t\ttotal += float64({recv}.{_camel(f)})", "\t}",
                  "\treturn total", "}", ""]
    return lines


def _go_handler(m: _Shape, recv: str) -> list[str]:
    return ["// Handler serves GET /items, GET /items/{id} and POST /items.",
            "func (s *Store) Handler() http.Handler {", "\tmux := http.NewServeMux()",
            '\tmux.HandleFunc("/items", func(w http.ResponseWriter, r *http.Request) {',
            "\t\tswitch r.Method {", "\t\tcase http.MethodGet:",
            '\t\t\twriteJSON(w, http.StatusOK, s.List(r.URL.Query().Get("status")))',
            "\t\tcase http.MethodPost:", f"\t\t\tvar {recv} {m.ent.name}",
            f"\t\t\tif err := json.NewDecoder(r.Body).Decode(&{recv}); err != nil {{",
            '\t\t\t\thttp.Error(w, "bad JSON: "+err.Error(), http.StatusBadRequest)',
            "\t\t\t\treturn", "\t\t\t}",
            f"\t\t\tif err := s.Add({recv}); err != nil {{",
            "\t\t\t\thttp.Error(w, err.Error(), http.StatusUnprocessableEntity)", "\t\t\t\treturn",
            "\t\t\t}",
            f"\t\t\twriteJSON(w, http.StatusCreated, {recv})", "\t\tdefault:",
            '\t\t\thttp.Error(w, "method not allowed", http.StatusMethodNotAllowed)', "\t\t}",
            "\t})",
            '\tmux.HandleFunc("/items/", func(w http.ResponseWriter, r *http.Request) {',
            '\t\tid, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/items/"), 10, 64)',
            "\t\tif err != nil {", '\t\t\thttp.Error(w, "bad id", http.StatusBadRequest)',
            "\t\t\treturn", "\t\t}",
            f"\t\t{recv}, err := s.Get(id)", "\t\tif errors.Is(err, ErrNotFound) {",
            "\t\t\thttp.Error(w, err.Error(), http.StatusNotFound)", "\t\t\treturn", "\t\t}",
            f"\t\twriteJSON(w, http.StatusOK, {recv})", "\t})", "\treturn mux", "}", "",
            "func writeJSON(w http.ResponseWriter, status int, v any) {",
            '\tw.Header().Set("Content-Type", "application/json")', "\tw.WriteHeader(status)",
            "\t_ = json.NewEncoder(w).Encode(v)", "}", "",
            "// Age returns how long ago t was, rounded to whole days.",
            "func Age(t time.Time, now time.Time) int {",
            "\treturn int(now.Sub(t).Hours() / 24)", "}", ""]
