// SpawnedSeed: a child of numpy.random.SeedSequence(seed, spawn_key=key) whose first four
// 64-bit words (what PCG64 seeds itself from) the caller has already computed
// (rfl_fast.kernels.streams.spawned_generators hashes them for all clients at once). Written
// here, not in Python, so that making a round's generators calls no Python function per
// client: PCG64's call to generate_state(4, numpy.uint64) returns a copy of the words; anything
// else (other words, spawn, entropy, pickling) is the SeedSequence's own, made on first use.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "binding.hpp"

namespace {

// numpy.uint64, numpy.random.SeedSequence (set by register_seeds, with the GIL, at import;
// kept for the process: a py::object would be released after the interpreter)
py::handle np_uint64, np_seed_sequence;

class SpawnedSeed {
  public:
    SpawnedSeed(py::object seed, py::tuple key, py::object i, const py::array& words)
        : seed_(std::move(seed)) {
        if (words.ndim() != 1 || words.shape(0) != 4 ||
            !words.dtype().is(py::dtype::of<std::uint64_t>()))
            throw py::value_error("SpawnedSeed: words: expected 4 uint64, got " +
                                  std::string(py::str(words.attr("dtype"))) + " of shape " +
                                  std::string(py::str(words.attr("shape"))));
        const auto w = words.unchecked<std::uint64_t, 1>();  // any strides
        for (py::ssize_t j = 0; j < 4; ++j) words_[j] = w(j);
        key_ = py::tuple(key.size() + 1);
        for (std::size_t j = 0; j < key.size(); ++j) key_[j] = key[j];
        key_[key.size()] = std::move(i);
    }

    py::object generate_state(const py::object& n_words, const py::object& dtype) {
        if (dtype.is(np_uint64) && py::isinstance<py::int_>(n_words) &&
            n_words.equal(py::int_(4)))
            return py::array_t<std::uint64_t>(4, words_.data());  // a copy
        return sequence().attr("generate_state")(n_words, dtype);
    }

    // numpy.random.SeedSequence(seed, spawn_key=key), made once
    py::object sequence() {
        if (!full_) full_ = np_seed_sequence(seed_, py::arg("spawn_key") = key_);
        return full_;
    }

  private:
    py::object seed_;
    py::tuple key_;
    std::array<std::uint64_t, 4> words_{};
    py::object full_;
};

// numpy.random.SeedSequence's hashing (Melissa O'Neill's seed_seq_fe; NumPy's bit_generator.pyx)
constexpr std::uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd,
                        kMultB = 0x58f38ded, kMixL = 0xca01f9dd, kMixR = 0x4973f715;

// SeedSequence(entropy).generate_state(4, uint64) for the entropy words `e` (n of them):
// the pool of 4 words mixed as SeedSequence.mix_entropy, then 8 words drawn from it, paired
// little-endian
void hashed(const std::uint32_t* e, std::size_t n, std::uint64_t* out) {
    std::uint32_t hc = kInitA;
    const auto hashmix = [&hc](std::uint32_t v) {
        v ^= hc;
        hc *= kMultA;
        v *= hc;
        return v ^ (v >> 16);
    };
    const auto mix = [](std::uint32_t x, std::uint32_t y) {
        const std::uint32_t r = kMixL * x - kMixR * y;
        return r ^ (r >> 16);
    };
    std::uint32_t pool[4];
    for (std::size_t i = 0; i < 4; ++i) pool[i] = hashmix(i < n ? e[i] : 0u);
    for (std::size_t src = 0; src < 4; ++src)
        for (std::size_t dst = 0; dst < 4; ++dst)
            if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
    for (std::size_t src = 4; src < n; ++src)
        for (std::size_t dst = 0; dst < 4; ++dst) pool[dst] = mix(pool[dst], hashmix(e[src]));
    std::uint32_t h = kInitB, w[8];
    for (int i = 0; i < 8; ++i) {
        std::uint32_t v = pool[i % 4] ^ h;
        h *= kMultB;
        v *= h;
        w[i] = v ^ (v >> 16);
    }
    for (int i = 0; i < 4; ++i)
        out[i] = static_cast<std::uint64_t>(w[2 * i]) | (static_cast<std::uint64_t>(w[2 * i + 1]) << 32);
}

// (n, 4): row j the words of SeedSequence(entropy = prefix + id j's words): prefix the root
// seed's words (padded to 4, as for any spawned child) and the key's; an id's words are its
// low 32 bits, and its high ones where not zero
py::array_t<std::uint64_t> spawn_words(const py::sequence& prefix_words,
                                       const py::array_t<std::uint64_t, py::array::c_style |
                                                                        py::array::forcecast>& ids) {
    if (ids.ndim() != 1) throw py::value_error("spawn_words: ids: expected a 1-D array");
    std::vector<std::uint32_t> prefix;
    for (const auto& w : prefix_words) {
        const auto v = w.cast<unsigned long long>();
        if (v > 0xffffffffULL)
            throw py::value_error("spawn_words: prefix: expected 32-bit words, got " +
                                  std::to_string(v));
        prefix.push_back(static_cast<std::uint32_t>(v));
    }
    const py::ssize_t n = ids.shape(0);
    py::array_t<std::uint64_t> out({n, py::ssize_t(4)});
    std::vector<std::uint32_t> e(prefix);
    e.resize(prefix.size() + 2);
    const std::uint64_t* pi = ids.data();
    std::uint64_t* po = out.mutable_data();
    for (py::ssize_t j = 0; j < n; ++j) {
        const std::uint64_t id = pi[j];
        e[prefix.size()] = static_cast<std::uint32_t>(id);
        e[prefix.size() + 1] = static_cast<std::uint32_t>(id >> 32);
        hashed(e.data(), prefix.size() + (id >> 32 ? 2 : 1), po + 4 * j);
    }
    return out;
}

}  // namespace

void register_seeds(py::module_& m) {
    m.def("spawn_words", &spawn_words, py::arg("prefix"), py::arg("ids"),
          R"pbdoc(``numpy.random.SeedSequence(entropy).generate_state(4, numpy.uint64)`` for each id
(uint64, 1-D): ``(n, 4)`` uint64, the entropy ``prefix`` (uint32 words: the root seed's,
padded to 4, then the spawn key's) followed by the id's words (its low 32 bits, then its high
ones where not zero), as SeedSequence reads ``SeedSequence(seed, spawn_key=key + (id,))``.
rfl_fast.kernels.streams.spawn_words; tested against NumPy's.)pbdoc");
    np_uint64 = py::object(py::module_::import("numpy").attr("uint64")).release();
    np_seed_sequence = py::object(py::module_::import("numpy.random").attr("SeedSequence")).release();
    py::class_<SpawnedSeed>(m, "SpawnedSeed", R"pbdoc(
``numpy.random.SeedSequence(seed, spawn_key=key + (i,))`` with ``words``, its
``generate_state(4, numpy.uint64)``, given: PCG64 seeds from them without the hashing (which
costs a client more than the draws of a private step). Anything else (other words, ``spawn``,
``entropy``, ``spawn_key``, pickling and copying, which give the SeedSequence) is the
SeedSequence's own (``sequence()``, made on first use). Registered as a
``numpy.random.bit_generator.ISpawnableSeedSequence`` by rfl_fast.kernels.streams, which checks
the words against NumPy's.)pbdoc")
        .def(py::init<py::object, py::tuple, py::object, const py::array&>(), py::arg("seed"),
             py::arg("key"), py::arg("i"), py::arg("words"))
        .def("generate_state", &SpawnedSeed::generate_state, py::arg("n_words"),
             py::arg("dtype") = py::module_::import("numpy").attr("uint32"))
        .def("spawn", [](SpawnedSeed& s, const py::object& n) {
            return s.sequence().attr("spawn")(n); }, py::arg("n_children"))
        .def("sequence", &SpawnedSeed::sequence,
             "The numpy.random.SeedSequence itself (made on first use).")
        .def("__getattr__", [](SpawnedSeed& s, const py::str& name) {
            return s.sequence().attr(name); })
        .def("__reduce__", [](SpawnedSeed& s) { return s.sequence().attr("__reduce__")(); })
        .def("__repr__", [](SpawnedSeed& s) { return py::repr(s.sequence()); });
}
