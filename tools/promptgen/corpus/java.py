"""Java snippets: a bank account, an LRU cache, a CSV parser, a sliding-window counter."""

# Snippet code is source text kept verbatim; some of its lines are longer than the house limit.
# ruff: noqa: E501
from __future__ import annotations

from tools.promptgen.model import Bug, Snippet

JAVA: tuple[Snippet, ...] = (
    Snippet(
        "java_account", "java", "Account",
        "models a bank account with deposits, withdrawals and an atomic transfer between accounts",
        "Write a Java class `Account` with an id, an owner and a balance in cents (long), methods "
        "`deposit(long cents)`, `withdraw(long cents)` and a static `transfer(Account from, Account "
        "to, long cents)`. Reject non-positive amounts with IllegalArgumentException and "
        "overdrafts with an `InsufficientFundsException` (checked). Make transfer thread-safe "
        "without deadlocks by locking accounts in id order.",
        r'''public final class Account {
    private final long id;
    private final String owner;
    private long balanceCents;

    public Account(long id, String owner, long openingCents) {
        if (openingCents < 0) {
            throw new IllegalArgumentException("opening balance must not be negative");
        }
        this.id = id;
        this.owner = owner;
        this.balanceCents = openingCents;
    }

    public synchronized long balanceCents() {
        return balanceCents;
    }

    public synchronized void deposit(long cents) {
        requirePositive(cents);
        balanceCents += cents;
    }

    public synchronized void withdraw(long cents) throws InsufficientFundsException {
        requirePositive(cents);
        if (cents > balanceCents) {
            throw new InsufficientFundsException(id, cents, balanceCents);
        }
        balanceCents -= cents;
    }

    public static void transfer(Account from, Account to, long cents) throws InsufficientFundsException {
        Account first = from.id < to.id ? from : to;
        Account second = first == from ? to : from;
        synchronized (first) {
            synchronized (second) {
                from.withdraw(cents);
                to.deposit(cents);
            }
        }
    }

    private static void requirePositive(long cents) {
        if (cents <= 0) {
            throw new IllegalArgumentException("amount must be positive, got " + cents);
        }
    }

    public String owner() {
        return owner;
    }
}

class InsufficientFundsException extends Exception {
    InsufficientFundsException(long accountId, long requested, long available) {
        super("account " + accountId + ": requested " + requested + " cents, only " + available + " available");
    }
}
''',
        {"Account": ("Wallet", "LedgerAccount", "BankAccount"), "balanceCents": ("cents", "amountCents")},
        (Bug("if (cents > balanceCents)", "if (cents > balanceCents + 1)",
             "[ERROR] Tests run: 6, Failures: 1, Errors: 0, Skipped: 0\n[ERROR] AccountTest.withdrawMoreThanBalance"
             "  Time elapsed: 0.004 s  <<< FAILURE!\norg.opentest4j.AssertionFailedError: Expected "
             "InsufficientFundsException to be thrown, but nothing was thrown.\n"
             "\tat AccountTest.withdrawMoreThanBalance(AccountTest.java:31)"),),
        (),
    ),
    Snippet(
        "java_lru", "java", "LruCache",
        "is an LRU cache built on LinkedHashMap's access order",
        "Implement `LruCache<K, V>` in Java by extending LinkedHashMap with access order and "
        "overriding removeEldestEntry so the map never holds more than `maxEntries` entries. "
        "Validate that maxEntries is positive.",
        r'''import java.util.LinkedHashMap;
import java.util.Map;

public class LruCache<K, V> extends LinkedHashMap<K, V> {
    private final int maxEntries;

    public LruCache(int maxEntries) {
        super(16, 0.75f, true);
        if (maxEntries <= 0) {
            throw new IllegalArgumentException("maxEntries must be positive: " + maxEntries);
        }
        this.maxEntries = maxEntries;
    }

    @Override
    protected boolean removeEldestEntry(Map.Entry<K, V> eldest) {
        return size() > maxEntries;
    }

    public int maxEntries() {
        return maxEntries;
    }
}
''',
        {"LruCache": ("BoundedCache", "RecentMap", "AccessOrderCache"), "maxEntries": ("capacity", "limit")},
        (Bug("super(16, 0.75f, true);", "super(16, 0.75f, false);",
             "[ERROR] LruCacheTest.getRefreshesEntry  Time elapsed: 0.002 s  <<< FAILURE!\n"
             "org.opentest4j.AssertionFailedError: expected: <[b, a]> but was: <[a, b]>\n"
             "\tat LruCacheTest.getRefreshesEntry(LruCacheTest.java:22)"),),
        (),
    ),
    Snippet(
        "java_csv", "java", "CsvParser",
        "splits one CSV line into fields, handling quoted fields and doubled quotes",
        "Write a Java class `CsvParser` with a static method `List<String> parseLine(String line)` "
        "that splits a CSV line on commas, supports fields in double quotes that contain commas, "
        "turns a doubled quote inside a quoted field into one quote, and throws "
        "IllegalArgumentException for an unterminated quote.",
        r'''import java.util.ArrayList;
import java.util.List;

public final class CsvParser {
    private CsvParser() {
    }

    public static List<String> parseLine(String line) {
        List<String> fields = new ArrayList<>();
        StringBuilder current = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (quoted) {
                if (c == '"' && i + 1 < line.length() && line.charAt(i + 1) == '"') {
                    current.append('"');
                    i++;
                } else if (c == '"') {
                    quoted = false;
                } else {
                    current.append(c);
                }
            } else if (c == '"') {
                quoted = true;
            } else if (c == ',') {
                fields.add(current.toString());
                current.setLength(0);
            } else {
                current.append(c);
            }
        }
        if (quoted) {
            throw new IllegalArgumentException("unterminated quote in: " + line);
        }
        fields.add(current.toString());
        return fields;
    }
}
''',
        {"CsvParser": ("CsvLine", "CsvSplitter", "RecordParser"), "parseLine": ("split", "fieldsOf")},
        (Bug("                fields.add(current.toString());\n                current.setLength(0);",
             "                fields.add(current.toString());",
             "[ERROR] CsvParserTest.splitsPlainFields  Time elapsed: 0.003 s  <<< FAILURE!\n"
             "org.opentest4j.AssertionFailedError: expected: <[a, b, c]> but was: <[a, ab, abc]>"),),
        (),
    ),
    Snippet(
        "java_rate_window", "java", "SlidingWindowCounter",
        "counts events in a sliding time window per key, for rate limiting",
        "Write a thread-safe Java class `SlidingWindowCounter` that records events per key and "
        "answers `boolean tryRecord(String key, long nowMillis)`: allow at most `limit` events per "
        "key in the last `windowMillis` milliseconds, dropping timestamps that fell out of the "
        "window. Use a ConcurrentHashMap of ArrayDeque<Long>.",
        r'''import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.ConcurrentHashMap;

public final class SlidingWindowCounter {
    private final int limit;
    private final long windowMillis;
    private final ConcurrentHashMap<String, Deque<Long>> events = new ConcurrentHashMap<>();

    public SlidingWindowCounter(int limit, long windowMillis) {
        if (limit <= 0 || windowMillis <= 0) {
            throw new IllegalArgumentException("limit and windowMillis must be positive");
        }
        this.limit = limit;
        this.windowMillis = windowMillis;
    }

    public boolean tryRecord(String key, long nowMillis) {
        Deque<Long> times = events.computeIfAbsent(key, k -> new ArrayDeque<>());
        synchronized (times) {
            while (!times.isEmpty() && times.peekFirst() <= nowMillis - windowMillis) {
                times.pollFirst();
            }
            if (times.size() >= limit) {
                return false;
            }
            times.addLast(nowMillis);
            return true;
        }
    }
}
''',
        {"SlidingWindowCounter": ("RateWindow", "WindowLimiter", "EventWindow"), "tryRecord": ("allow", "record")},
        (Bug("if (times.size() >= limit)", "if (times.size() > limit)",
             "[ERROR] SlidingWindowCounterTest.rejectsOverLimit  <<< FAILURE!\n"
             "org.opentest4j.AssertionFailedError: expected: <false> but was: <true>\n"
             "\tat SlidingWindowCounterTest.rejectsOverLimit(SlidingWindowCounterTest.java:18)"),),
        (),
    ),
)
