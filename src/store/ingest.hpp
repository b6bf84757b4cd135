// One result row from another machine's database into this one, as it arrives: what `kbv run
// --ray` does with each row its nodes stream back. A row is what `kbv export` writes per line
// (the result JSON with its row info under "_row"), so it holds every column of the store. The
// rule is kbv merge's, one row at a time: rows are keyed by content, the same row twice is
// stored once, and two different results under one key keep the one merge would keep.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "store/store.hpp"

namespace kbv::store {

// A row without the row info a store needs (no "_row", no key): nothing was stored.
class IngestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Ingested {
  enum class Outcome {
    Stored,      // a key the store did not have
    Duplicate,   // the same result was stored already: nothing written
    KeptStored,  // a different result was stored already and stays (merge's rule)
    Replaced,    // a different result was stored already and the incoming one replaced it
  };
  Outcome outcome = Outcome::Stored;
  std::string why;  // KeptStored and Replaced: merge's reason
  bool written() const { return outcome == Outcome::Stored || outcome == Outcome::Replaced; }
};

// Stores `exported` (one line of `kbv export`) in `db` unless it holds that result already.
// The row keeps its finish time; "_row" is not part of the stored result. `evaluated_again`: the
// row is a new evaluation of a stored result that a run chose to evaluate again (a timeout under
// a longer timeout, a harness error), so it replaces that result as kbv run's own would, whatever
// the finish times of two machines' clocks say.
Ingested ingest_row(Store& db, const nlohmann::json& exported, bool evaluated_again = false);

}  // namespace kbv::store
