"""C++ snippets: a matrix class, string splitting, a bounded blocking queue."""

# Snippet code is source text kept verbatim; some of its lines are longer than the house limit.
# ruff: noqa: E501
from __future__ import annotations

from tools.promptgen.model import Bug, Snippet

CPP: tuple[Snippet, ...] = (
    Snippet(
        "cpp_matrix", "cpp", "Matrix",
        "is a dense row-major matrix with bounds-checked access and multiplication",
        "Write a C++17 class `Matrix` storing doubles in a row-major std::vector with a "
        "constructor (rows, cols), `at(r, c)` accessors that throw std::out_of_range, and "
        "`Matrix operator*(const Matrix&) const` that throws std::invalid_argument on a shape "
        "mismatch. Use the i-k-j loop order for cache friendliness.",
        r'''#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

class Matrix {
public:
    Matrix(std::size_t rows, std::size_t cols) : rows_(rows), cols_(cols), data_(rows * cols, 0.0) {}

    std::size_t rows() const { return rows_; }
    std::size_t cols() const { return cols_; }

    double& at(std::size_t r, std::size_t c) {
        check(r, c);
        return data_[r * cols_ + c];
    }

    double at(std::size_t r, std::size_t c) const {
        check(r, c);
        return data_[r * cols_ + c];
    }

    Matrix operator*(const Matrix& other) const {
        if (cols_ != other.rows_) {
            throw std::invalid_argument("shape mismatch: " + std::to_string(cols_) + " vs " +
                                        std::to_string(other.rows_));
        }
        Matrix out(rows_, other.cols_);
        for (std::size_t i = 0; i < rows_; ++i) {
            for (std::size_t k = 0; k < cols_; ++k) {
                const double a = data_[i * cols_ + k];
                for (std::size_t j = 0; j < other.cols_; ++j) {
                    out.data_[i * other.cols_ + j] += a * other.data_[k * other.cols_ + j];
                }
            }
        }
        return out;
    }

private:
    void check(std::size_t r, std::size_t c) const {
        if (r >= rows_ || c >= cols_) {
            throw std::out_of_range("index (" + std::to_string(r) + ", " + std::to_string(c) + ")");
        }
    }

    std::size_t rows_;
    std::size_t cols_;
    std::vector<double> data_;
};
''',
        {"Matrix": ("DenseMatrix", "Mat", "Grid2D")},
        (Bug("out.data_[i * other.cols_ + j] += a * other.data_[k * other.cols_ + j];",
             "out.data_[i * other.cols_ + j] = a * other.data_[k * other.cols_ + j];",
             "[ RUN      ] MatrixTest.MultipliesTwoByTwo\nmatrix_test.cpp:27: Failure\nExpected equality of "
             "these values:\n  c.at(0, 0)\n    Which is: 14\n  19\n[  FAILED  ] MatrixTest.MultipliesTwoByTwo (0 ms)"),),
        (),
    ),
    Snippet(
        "cpp_split", "cpp", "split",
        "splits and trims strings by a delimiter, optionally dropping empty parts",
        "Write C++17 functions `std::string trim(std::string_view s)` and "
        "`std::vector<std::string> split(std::string_view s, char delim, bool keep_empty = false)` "
        "that trim ASCII whitespace from each part.",
        r'''#include <string>
#include <string_view>
#include <vector>

std::string trim(std::string_view s) {
    const char* ws = " \t\r\n";
    const auto first = s.find_first_not_of(ws);
    if (first == std::string_view::npos) {
        return {};
    }
    const auto last = s.find_last_not_of(ws);
    return std::string(s.substr(first, last - first + 1));
}

std::vector<std::string> split(std::string_view s, char delim, bool keep_empty = false) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        const auto pos = s.find(delim, start);
        const auto piece = trim(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
        if (keep_empty || !piece.empty()) {
            parts.push_back(piece);
        }
        if (pos == std::string_view::npos) {
            break;
        }
        start = pos + 1;
    }
    return parts;
}
''',
        {"split": ("split_fields", "tokenize", "explode"), "trim": ("strip", "trim_ascii")},
        (Bug("return std::string(s.substr(first, last - first + 1));", "return std::string(s.substr(first, last - first));",
             "[ RUN      ] SplitTest.TrimsParts\nsplit_test.cpp:12: Failure\nExpected equality of these values:\n"
             "  parts[0]\n    Which is: \"ab\"\n  \"abc\"\n[  FAILED  ] SplitTest.TrimsParts (0 ms)"),),
        (),
    ),
    Snippet(
        "cpp_bounded_queue", "cpp", "BoundedQueue",
        "is a blocking bounded queue for producer/consumer threads",
        "Implement a C++17 class template `BoundedQueue<T>` with a fixed capacity, `void push(T)` "
        "that blocks while full, `T pop()` that blocks while empty, and `bool try_pop(T&)`. Use one "
        "std::mutex and two std::condition_variable objects.",
        r'''#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

template <typename T>
class BoundedQueue {
public:
    explicit BoundedQueue(std::size_t capacity) : capacity_(capacity) {}

    void push(T value) {
        std::unique_lock<std::mutex> lock(mutex_);
        not_full_.wait(lock, [&] { return items_.size() < capacity_; });
        items_.push_back(std::move(value));
        not_empty_.notify_one();
    }

    T pop() {
        std::unique_lock<std::mutex> lock(mutex_);
        not_empty_.wait(lock, [&] { return !items_.empty(); });
        T value = std::move(items_.front());
        items_.pop_front();
        not_full_.notify_one();
        return value;
    }

    bool try_pop(T& out) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (items_.empty()) {
            return false;
        }
        out = std::move(items_.front());
        items_.pop_front();
        not_full_.notify_one();
        return true;
    }

private:
    std::size_t capacity_;
    std::deque<T> items_;
    std::mutex mutex_;
    std::condition_variable not_full_;
    std::condition_variable not_empty_;
};
''',
        {"BoundedQueue": ("BlockingQueue", "WorkQueue", "Channel")},
        (Bug("        items_.pop_front();\n        not_full_.notify_one();\n        return value;",
             "        items_.pop_front();\n        return value;",
             "[ RUN      ] BoundedQueueTest.ProducerConsumer\n(test hangs; killed by ctest after 1500 s)\n"
             "The following tests FAILED:\n\t  3 - BoundedQueueTest.ProducerConsumer (Timeout)"),),
        (),
    ),
)
