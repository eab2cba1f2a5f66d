// SpawnedSeed: a child of numpy.random.SeedSequence(seed, spawn_key=key) whose first four
// 64-bit words (what PCG64 seeds itself from) the caller has already computed
// (rfl_fast.kernels.streams.spawned_generators hashes them for all clients at once). Written
// here, not in Python, so that making a round's generators calls no Python function per
// client: PCG64's call to generate_state(4, numpy.uint64) returns a copy of the words; anything
// else (other words, spawn, entropy, pickling) is the SeedSequence's own, made on first use.
#include <array>
#include <cstdint>
#include <string>

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

}  // namespace

void register_seeds(py::module_& m) {
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
