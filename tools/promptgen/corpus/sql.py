"""SQL (PostgreSQL) snippets: monthly revenue, top customers per region, de-duplication."""

# Snippet code is source text kept verbatim; some of its lines are longer than the house limit.
# ruff: noqa: E501
from __future__ import annotations

from tools.promptgen.model import Bug, Snippet

SQL: tuple[Snippet, ...] = (
    Snippet(
        "sql_monthly_revenue", "sql", "monthly_revenue",
        "reports revenue, order count and month-over-month growth per month from orders",
        "Write a PostgreSQL query over `orders(id, customer_id, status, total_cents, created_at)` "
        "that returns, for each calendar month, the revenue in dollars of completed orders, the "
        "number of completed orders, and the growth in percent against the previous month "
        "(NULL for the first month). Order by month.",
        r'''-- monthly_revenue: completed-order revenue per month with month-over-month growth
WITH monthly AS (
    SELECT date_trunc('month', created_at) AS month,
           SUM(total_cents) / 100.0        AS revenue,
           COUNT(*)                        AS orders
    FROM orders
    WHERE status = 'completed'
    GROUP BY 1
)
SELECT month,
       revenue,
       orders,
       ROUND(100.0 * (revenue - LAG(revenue) OVER (ORDER BY month))
             / NULLIF(LAG(revenue) OVER (ORDER BY month), 0), 1) AS growth_pct
FROM monthly
ORDER BY month;
''',
        {"monthly": ("per_month", "by_month"), "orders": ("purchases", "sales")},
        (Bug("WHERE status = 'completed'\n", "",
             "Finance reports that March 2024 revenue from this query is $48,210.00, but the ledger "
             "shows $41,975.50. The difference matches the total of refunded and cancelled orders "
             "that month."),),
        (),
    ),
    Snippet(
        "sql_top_customers", "sql", "top_customers",
        "ranks each region's top three customers by lifetime spend with a window function",
        "Write a SQL query over `customers(id, name, region)` and `orders(id, customer_id, "
        "total_cents, status)` that returns the top 3 customers by lifetime spend of paid orders in "
        "each region, with their rank (ties share a rank), using a window function.",
        r'''-- top_customers: three biggest spenders per region
WITH spend AS (
    SELECT c.region,
           c.id   AS customer_id,
           c.name,
           SUM(o.total_cents) AS spent_cents
    FROM customers c
    JOIN orders o ON o.customer_id = c.id
    WHERE o.status = 'paid'
    GROUP BY c.region, c.id, c.name
),
ranked AS (
    SELECT spend.*,
           RANK() OVER (PARTITION BY region ORDER BY spent_cents DESC) AS spend_rank
    FROM spend
)
SELECT region, customer_id, name, spent_cents, spend_rank
FROM ranked
WHERE spend_rank <= 3
ORDER BY region, spend_rank, name;
''',
        {"spend": ("totals", "lifetime"), "ranked": ("ordered", "leaderboard")},
        (Bug("PARTITION BY region ORDER BY", "ORDER BY",
             "The report lists only three customers in total, all from the EMEA region; every other "
             "region is missing from the output."),),
        (),
    ),
    Snippet(
        "sql_dedupe", "sql", "dedupe_events",
        "removes duplicate event rows keeping the earliest per (user_id, event_type, payload)",
        "Write a PostgreSQL statement that deletes duplicate rows from `events(id bigserial, "
        "user_id, event_type, payload jsonb, received_at)`, keeping only the earliest received row "
        "for each (user_id, event_type, payload) and breaking ties by the smallest id.",
        r'''-- dedupe_events: keep the first copy of each event
DELETE FROM events e
USING (
    SELECT id,
           ROW_NUMBER() OVER (
               PARTITION BY user_id, event_type, payload
               ORDER BY received_at, id
           ) AS copy_no
    FROM events
) d
WHERE e.id = d.id
  AND d.copy_no > 1;
''',
        {"copy_no": ("dup_rank", "rn"), "events": ("audit_events", "tracking_events")},
        (Bug("d.copy_no > 1", "d.copy_no >= 1",
             "After running the cleanup on staging, the events table is empty: SELECT count(*) FROM "
             "events returns 0, where 1,204,331 rows were expected to remain."),),
        (),
    ),
)
