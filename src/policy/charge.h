// Charge: what an allowed request took from the store and may still give
// back, each part at most once: its count_status charge, settled when the
// request's outcome is known (settle), its concurrency slots, released
// when it ends (release), or all of it when the request never goes on
// (cancel). The gateway's exchange holds one per proxied request; /v1/auth
// releases its slots through one at once, and a held request whose client
// left cancels through one. Whatever gives back goes through it, so that
// nothing is given back twice (a slot given back twice would free another
// request's).
//
// Thread-safety: one thread at a time (the exchange's worker); the store
// may complete a give-back on that thread's event loop.
#pragma once

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "policy/decider.h"
#include "policy/observer.h"
#include "policy/policy.h"
#include "sluice/clock.h"
#include "sluice/store.h"

namespace sluice::policy {

// How a charged request ended, for Charge::settle().
struct Settlement {
  // The status the upstream answered with; nullopt: the upstream never
  // received the request (nothing was tried), so count_status gives every
  // such charge back.
  std::optional<int> status;
};

class Charge {
 public:
  // Holds nothing: settle() and release() give nothing back.
  Charge() = default;
  // The charge of `verdict` (decided for `plan`). `store`, `clock`, `plan`,
  // `verdict` and `observer` must outlive the charge and every give-back it
  // starts. Counts the slots it took (observer.on_slots_taken()).
  Charge(Store& store, const Clock& clock, const Plan& plan, const Verdict& verdict,
         const ChargeObserver& observer);
  Charge(Charge&& other) noexcept { *this = std::move(other); }
  Charge& operator=(Charge&& other) noexcept;
  Charge(const Charge&) = delete;
  Charge& operator=(const Charge&) = delete;
  // Releases the slots still held: a request torn down without an end.
  ~Charge() { release(); }

  // count_status: gives back each limit whose count_status does not list
  // the outcome's status; only the first call does anything. `then()` runs
  // once the store has applied it, or at once when there is nothing to give
  // back. `then` may hold what keeps the charge alive (the store's callback
  // holds `then`).
  template <class Then>
  void settle(Settlement outcome, Then&& then);
  // concurrency: gives back the slots, once; `then` as for settle().
  template <class Then>
  void release(Then&& then);
  void release() {
    release([] {});
  }
  // The request never went on (a held request whose client left before its
  // turn): every limit it charged goes back (policy::give_back_all), its
  // slots counted as released, and nothing is left to settle or release.
  // Gives nothing back once settle() or release() has given part of it
  // back. `then` as for settle().
  template <class Then>
  void cancel(Then&& then);

  bool holds_slots() const { return slots_held_; }
  // Whether settle() has nothing (left) to give back: settled, or no
  // count_status among the charged limits.
  bool settled() const { return settled_; }

 private:
  Store* store_ = nullptr;
  const Clock* clock_ = nullptr;
  const Plan* plan_ = nullptr;
  const Verdict* verdict_ = nullptr;
  const ChargeObserver* observer_ = nullptr;
  bool settled_ = false;
  bool slots_held_ = false;
  bool partly_given_back_ = false;  // by settle() or release(): cancel() is too late
};

// ---- implementation -------------------------------------------------------

template <class Then>
void Charge::settle(Settlement outcome, Then&& then) {
  if (settled_ || verdict_ == nullptr) return then();
  settled_ = true;
  partly_given_back_ = true;
  auto pending = std::make_shared<std::decay_t<Then>>(std::forward<Then>(then));
  const size_t given_back =
      give_back_uncounted(*store_, *plan_, *verdict_, outcome.status, clock_->now(),
                          [observer = observer_, pending](const Status& s) {
                            if (s.ok()) {
                              observer->on_refunded();
                            } else {
                              observer->on_give_back_failed();  // the store logs its own failures
                            }
                            (*pending)();
                          });
  if (given_back == 0) (*pending)();
}

template <class Then>
void Charge::release(Then&& then) {
  // Cleared first: whatever happens next, these slots are never given back twice.
  if (!std::exchange(slots_held_, false)) return then();
  partly_given_back_ = true;
  // Counted when asked, before the client can see the response end:
  // whoever reads the metric after a response sees its slot released.
  observer_->on_slots_released();
  auto pending = std::make_shared<std::decay_t<Then>>(std::forward<Then>(then));
  const size_t n = give_back_slots(*store_, *plan_, *verdict_, clock_->now(),
                                   [observer = observer_, pending](const Status& s) {
                                     // A slot not given back frees itself when its lease ends.
                                     if (!s.ok()) observer->on_give_back_failed();
                                     (*pending)();
                                   });
  if (n == 0) (*pending)();
}

template <class Then>
void Charge::cancel(Then&& then) {
  if (verdict_ == nullptr || std::exchange(partly_given_back_, true)) return then();
  settled_ = true;
  if (std::exchange(slots_held_, false)) observer_->on_slots_released();
  auto pending = std::make_shared<std::decay_t<Then>>(std::forward<Then>(then));
  const size_t n = give_back_all(*store_, *plan_, *verdict_, clock_->now(),
                                 [observer = observer_, pending](const Status& s) {
                                   if (!s.ok()) observer->on_give_back_failed();
                                   (*pending)();
                                 });
  if (n == 0) (*pending)();
}

}  // namespace sluice::policy
