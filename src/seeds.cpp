// SpawnedSeed: a child of numpy.random.SeedSequence(seed, spawn_key=key) whose first four
// 64-bit words (what PCG64 seeds itself from) the caller has already computed
// (rfl_fast.kernels.streams.spawned_generators hashes them for all clients at once). Written
// here, not in Python, so that making a round's generators calls no Python function per
// client: PCG64's call to generate_state(4, numpy.uint64) returns a copy of the words; any
// other call (other words, spawn) goes to the SeedSequence itself, made on first use.
#include <cstdint>

#include "binding.hpp"

namespace {

class SpawnedSeed {
  public:
    SpawnedSeed(py::object seed, py::tuple key, py::object i, py::array_t<std::uint64_t> words)
        : seed_(std::move(seed)), words_(std::move(words)) {
        if (words_.ndim() != 1 || words_.shape(0) != 4)
            throw py::value_error("SpawnedSeed: words: expected 4 uint64, got shape " +
                                  std::string(py::str(py::tuple(words_.attr("shape")))));
        key_ = py::tuple(key.size() + 1);
        for (std::size_t j = 0; j < key.size(); ++j) key_[j] = key[j];
        key_[key.size()] = std::move(i);
    }

    py::object generate_state(py::object n_words, py::object dtype) {
        // (kept for the process: a static py::object would be released after the interpreter)
        static const py::handle uint64 =
            py::object(py::module_::import("numpy").attr("uint64")).release();
        if (py::isinstance<py::int_>(n_words) && n_words.cast<long long>() == 4 &&
            dtype.is(uint64))
            return py::array_t<std::uint64_t>(4, words_.data());  // a copy
        return sequence().attr("generate_state")(n_words, dtype);
    }

    py::object spawn(py::object n_children) { return sequence().attr("spawn")(n_children); }

    // numpy.random.SeedSequence(seed, spawn_key=key), made once
    py::object sequence() {
        if (!full_) {
            static const py::handle cls =
                py::object(py::module_::import("numpy.random").attr("SeedSequence")).release();
            full_ = cls(seed_, py::arg("spawn_key") = key_);
        }
        return full_;
    }

  private:
    py::object seed_;
    py::tuple key_;
    py::array_t<std::uint64_t> words_;
    py::object full_;
};

}  // namespace

void register_seeds(py::module_& m) {
    py::class_<SpawnedSeed>(m, "SpawnedSeed", R"pbdoc(
``numpy.random.SeedSequence(seed, spawn_key=key + (i,))`` with ``words``, its
``generate_state(4, numpy.uint64)``, given: PCG64 seeds from them without the hashing (which
costs a client more than the draws of a private step). ``generate_state`` of other words and
``spawn`` are the SeedSequence's own (``sequence()``, made on first use). Registered as a
``numpy.random.bit_generator.ISpawnableSeedSequence`` by rfl_fast.kernels.streams, which checks
the words against NumPy's.)pbdoc")
        .def(py::init<py::object, py::tuple, py::object, py::array_t<std::uint64_t>>(),
             py::arg("seed"), py::arg("key"), py::arg("i"), py::arg("words"))
        .def("generate_state", &SpawnedSeed::generate_state, py::arg("n_words"),
             py::arg("dtype") = py::module_::import("numpy").attr("uint32"))
        .def("spawn", &SpawnedSeed::spawn, py::arg("n_children"))
        .def("sequence", &SpawnedSeed::sequence,
             "The numpy.random.SeedSequence itself (made on first use).");
}
