//! A terminal: it deals the next transaction type from a shuffled deck, generates the
//! inputs and runs the transaction against its home warehouse.
//!
//! # The deck
//!
//! Clause 5.2.3 sets minimums over the measurement interval: Payment at least 43%,
//! Order-Status, Delivery and Stock-Level at least 4% each; New-Order is the rest. Clause
//! 5.2.4.2 lets a terminal deal the types from a deck of cards, reshuffled when exhausted,
//! so that the minimums hold over every whole deck rather than only on average.
//! [`Deck::standard`] has 23 cards: 10 New-Order, 10 Payment, 1 Order-Status, 1 Delivery,
//! 1 Stock-Level (43.5%, 43.5%, 4.35% × 3). 23 is the smallest deck that meets every
//! minimum with some room to spare, so a run that stops part-way through a deck still meets
//! them; New-Order gets 43.5% instead of the nominal 45%. [`Deck::nominal`] has 100 cards
//! (45, 43, 4, 4, 4): the nominal mix exactly, with the minimums met only at whole decks.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use crate::error::{Result, TpccError};
use crate::schema::DISTRICTS_PER_WAREHOUSE;
use crate::txn::delivery::{delivery, DeliveryInput};
use crate::txn::new_order::{new_order, NewOrderInput, NewOrderOutput};
use crate::txn::order_status::{order_status, OrderStatusInput};
use crate::txn::payment::{payment, PaymentInput};
use crate::txn::stock_level::{stock_level, StockLevelInput};
use crate::txn::{
    execute_at, Decision, Executed, Isolation, Outcome, Retries, RetryPolicy, TxnOutcome,
};
use crate::workers::Workers;
use crate::workload::Workload;

/// The five transaction types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnKind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl TxnKind {
    pub const ALL: [TxnKind; 5] = [
        TxnKind::NewOrder,
        TxnKind::Payment,
        TxnKind::OrderStatus,
        TxnKind::Delivery,
        TxnKind::StockLevel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TxnKind::NewOrder => "new-order",
            TxnKind::Payment => "payment",
            TxnKind::OrderStatus => "order-status",
            TxnKind::Delivery => "delivery",
            TxnKind::StockLevel => "stock-level",
        }
    }

    /// Position in [`TxnKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for TxnKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A deck of transaction types, dealt in a random order and reshuffled when exhausted.
#[derive(Clone, Debug)]
pub struct Deck {
    cards: Vec<TxnKind>,
    /// Cards dealt from the current shuffle.
    dealt: usize,
}

impl Deck {
    /// 23 cards: 10 New-Order, 10 Payment, 1 each of the others (see the module docs).
    pub fn standard() -> Deck {
        Self::with_counts([10, 10, 1, 1, 1])
    }

    /// 100 cards: 45 New-Order, 43 Payment, 4 each of the others.
    pub fn nominal() -> Deck {
        Self::with_counts([45, 43, 4, 4, 4])
    }

    /// A deck with `counts[k]` cards of `TxnKind::ALL[k]` (an empty deck deals New-Order).
    pub fn with_counts(counts: [usize; 5]) -> Deck {
        let mut cards = Vec::new();
        for (kind, count) in TxnKind::ALL.into_iter().zip(counts) {
            cards.extend(std::iter::repeat_n(kind, count));
        }
        let dealt = cards.len(); // shuffle before the first card
        Deck { cards, dealt }
    }

    /// Cards in the deck.
    pub fn len(&self) -> usize {
        self.cards.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cards.is_empty()
    }

    /// The next card, reshuffling first when the deck is exhausted.
    pub fn deal<R: Rng + ?Sized>(&mut self, rng: &mut R) -> TxnKind {
        if self.dealt >= self.cards.len() {
            self.cards.shuffle(rng);
            self.dealt = 0;
        }
        let card = self.cards.get(self.dealt).copied();
        self.dealt += 1;
        card.unwrap_or(TxnKind::NewOrder)
    }
}

/// One transaction as a terminal ran it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnReport {
    pub kind: TxnKind,
    pub outcome: Outcome,
    /// From the first attempt to the commit (or rollback), retries included.
    pub latency: Duration,
    /// Engine aborts on the way, by cause.
    pub retries: Retries,
    /// The order a committed New-Order entered (`None` for the other types, and for a
    /// New-Order that rolled back or was aborted).
    pub entered: Option<EnteredOrder>,
}

/// The order a committed New-Order entered: enough to find it again (its key) and to tell it
/// from another order that got the same id (customer, line count, entry date).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnteredOrder {
    pub w_id: u32,
    pub d_id: u32,
    pub o_id: u32,
    pub c_id: u32,
    /// `o_ol_cnt`: the order's lines.
    pub ol_cnt: u32,
    /// `o_entry_d`, µs since the epoch.
    pub entry_d: i64,
}

/// A terminal bound to a home warehouse (and to a district for Stock-Level, clause 2.8.1.1).
pub struct Terminal<'w, 'db> {
    workload: &'w Workload<'db>,
    w_id: u32,
    d_id: u32,
    rng: StdRng,
    deck: Deck,
    policy: RetryPolicy,
    stock_level_isolation: Isolation,
    workers: Option<&'w Workers>,
}

impl<'w, 'db> Terminal<'w, 'db> {
    /// A terminal of warehouse `w_id` whose Stock-Level transactions look at district
    /// `d_id`, with the standard deck and the default retry policy.
    pub fn new(workload: &'w Workload<'db>, w_id: u32, d_id: u32, rng: StdRng) -> Result<Self> {
        if !(1..=workload.warehouses()).contains(&w_id) {
            return Err(TpccError::InvalidArgument(format!(
                "warehouse {w_id} is not in 1 ..= {}",
                workload.warehouses()
            )));
        }
        if !(1..=DISTRICTS_PER_WAREHOUSE).contains(&d_id) {
            return Err(TpccError::InvalidArgument(format!(
                "district {d_id} is not in 1 ..= {DISTRICTS_PER_WAREHOUSE}"
            )));
        }
        Ok(Terminal {
            workload,
            w_id,
            d_id,
            rng,
            deck: Deck::standard(),
            policy: RetryPolicy::default(),
            stock_level_isolation: Isolation::ReadCommitted,
            workers: None,
        })
    }

    /// Uses `deck` from now on.
    pub fn with_deck(mut self, deck: Deck) -> Self {
        self.deck = deck;
        self
    }

    /// Uses `policy` from now on.
    pub fn with_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Runs Stock-Level at `isolation` from now on. By default at level 1 (read committed),
    /// all that clause 3.4.1 asks of it; serializable, it is aborted by every New-Order that
    /// changes a stock row it read, and each retry reads about 200 order lines again.
    pub fn with_stock_level_isolation(mut self, isolation: Isolation) -> Self {
        self.stock_level_isolation = isolation;
        self
    }

    /// Runs each attempt on one of `workers` from now on (see [`Workers`]); by default a
    /// terminal runs its transactions whenever it likes.
    pub fn with_workers(mut self, workers: &'w Workers) -> Self {
        self.workers = Some(workers);
        self
    }

    pub fn warehouse(&self) -> u32 {
        self.w_id
    }

    /// Deals the next transaction type and runs it. An `Err` is fatal (the database
    /// stopped, or a row the population guarantees is missing); aborts that outlast the
    /// retry policy come back as [`Outcome::Aborted`].
    pub fn run_next(&mut self) -> Result<TxnReport> {
        let kind = self.deck.deal(&mut self.rng);
        self.run(kind)
    }

    /// Runs one transaction of type `kind` with fresh random inputs.
    pub fn run(&mut self, kind: TxnKind) -> Result<TxnReport> {
        let mut entered = None;
        let (outcome, retries, latency) = match kind {
            TxnKind::NewOrder => {
                let (outcome, retries, latency, order) = self.new_order()?;
                entered = order;
                (outcome, retries, latency)
            }
            TxnKind::Payment => self.payment()?,
            TxnKind::OrderStatus => self.order_status()?,
            TxnKind::Delivery => self.delivery()?,
            TxnKind::StockLevel => self.stock_level()?,
        };
        Ok(TxnReport {
            kind,
            outcome,
            latency,
            retries,
            entered,
        })
    }

    /// Times `body` under the retry policy (the inputs are generated before the clock
    /// starts).
    fn timed<T>(
        &self,
        body: impl FnMut(&mut tailstore_engine::Transaction<'_>) -> Result<Decision<T>>,
    ) -> Result<(Outcome, Retries, Duration)> {
        self.timed_at(Isolation::Serializable, body)
    }

    /// [`Terminal::timed`] at `isolation`.
    fn timed_at<T>(
        &self,
        isolation: Isolation,
        body: impl FnMut(&mut tailstore_engine::Transaction<'_>) -> Result<Decision<T>>,
    ) -> Result<(Outcome, Retries, Duration)> {
        let (outcome, retries, latency) = self.timed_output_at(isolation, body)?;
        Ok((outcome.kind(), retries, latency))
    }

    /// [`Terminal::timed`], keeping the transaction's output.
    fn timed_output<T>(
        &self,
        body: impl FnMut(&mut tailstore_engine::Transaction<'_>) -> Result<Decision<T>>,
    ) -> Result<(TxnOutcome<T>, Retries, Duration)> {
        self.timed_output_at(Isolation::Serializable, body)
    }

    /// [`Terminal::timed_output`] at `isolation`.
    fn timed_output_at<T>(
        &self,
        isolation: Isolation,
        body: impl FnMut(&mut tailstore_engine::Transaction<'_>) -> Result<Decision<T>>,
    ) -> Result<(TxnOutcome<T>, Retries, Duration)> {
        let began = Instant::now();
        let Executed {
            outcome, retries, ..
        } = execute_at(
            self.workload.db(),
            isolation,
            &self.policy,
            self.workers,
            body,
        )?;
        Ok((outcome, retries, began.elapsed()))
    }

    /// Also returns the order entered, once committed (the commit has returned: in a durable
    /// commit mode the order is durable).
    fn new_order(&mut self) -> Result<(Outcome, Retries, Duration, Option<EnteredOrder>)> {
        let wl = self.workload;
        let c = wl.run_constants();
        let input = NewOrderInput::generate(&mut self.rng, self.w_id, wl.warehouses(), &c);
        let (outcome, retries, latency) =
            self.timed_output(|txn| new_order(txn, wl.tables(), &input))?;
        let entered = match &outcome {
            TxnOutcome::Committed(NewOrderOutput { o_id, .. }) => Some(EnteredOrder {
                w_id: input.w_id,
                d_id: input.d_id,
                o_id: *o_id,
                c_id: input.c_id,
                ol_cnt: input.lines.len() as u32,
                entry_d: input.entry_d,
            }),
            _ => None,
        };
        Ok((outcome.kind(), retries, latency, entered))
    }

    fn payment(&mut self) -> Result<(Outcome, Retries, Duration)> {
        let wl = self.workload;
        let c = wl.run_constants();
        let input = PaymentInput::generate(&mut self.rng, self.w_id, wl.warehouses(), &c);
        let h_id = wl.next_history_id();
        self.timed(|txn| payment(txn, wl.tables(), &input, h_id))
    }

    fn order_status(&mut self) -> Result<(Outcome, Retries, Duration)> {
        let wl = self.workload;
        let input = OrderStatusInput::generate(&mut self.rng, self.w_id, &wl.run_constants());
        self.timed(|txn| order_status(txn, wl.tables(), &input))
    }

    fn delivery(&mut self) -> Result<(Outcome, Retries, Duration)> {
        let wl = self.workload;
        let input = DeliveryInput::generate(&mut self.rng, self.w_id);
        self.timed(|txn| delivery(txn, wl.tables(), &input))
    }

    fn stock_level(&mut self) -> Result<(Outcome, Retries, Duration)> {
        let wl = self.workload;
        let input = StockLevelInput::generate(&mut self.rng, self.w_id, self.d_id);
        self.timed_at(self.stock_level_isolation, |txn| {
            stock_level(txn, wl.tables(), &input)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::seeded;

    fn shares(deck: &mut Deck, draws: usize) -> [f64; 5] {
        let mut rng = seeded(8);
        let mut counts = [0usize; 5];
        for _ in 0..draws {
            counts[deck.deal(&mut rng).index()] += 1;
        }
        counts.map(|c| c as f64 / draws as f64)
    }

    #[test]
    fn standard_deck_mix_over_100k_draws() {
        let mut deck = Deck::standard();
        assert_eq!(deck.len(), 23);
        let s = shares(&mut deck, 100_000);
        let expected = [10.0 / 23.0, 10.0 / 23.0, 1.0 / 23.0, 1.0 / 23.0, 1.0 / 23.0];
        for (got, want) in s.iter().zip(expected) {
            assert!((got - want).abs() < 0.002, "{s:?}");
        }
        assert!(s[1] >= 0.43 && s[2] >= 0.04 && s[3] >= 0.04 && s[4] >= 0.04);
    }

    #[test]
    fn nominal_deck_mix_over_100k_draws() {
        let s = shares(&mut Deck::nominal(), 100_000);
        for (got, want) in s.iter().zip([0.45, 0.43, 0.04, 0.04, 0.04]) {
            assert!((got - want).abs() < 0.002, "{s:?}");
        }
    }

    /// The minimums hold in every whole deck: each window of 23 aligned cards holds exactly
    /// the deck's counts.
    #[test]
    fn every_deck_window_holds_the_minimums() {
        let mut deck = Deck::standard();
        let mut rng = seeded(9);
        for _ in 0..1000 {
            let mut counts = [0; 5];
            for _ in 0..23 {
                counts[deck.deal(&mut rng).index()] += 1;
            }
            assert_eq!(counts, [10, 10, 1, 1, 1]);
        }
    }

    /// A driver shares the workload between threads and may build terminals on one thread
    /// and run them on another.
    #[test]
    fn terminals_can_move_between_threads() {
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<Terminal<'static, 'static>>();
        sync::<Workload<'static>>();
        send::<TxnReport>();
    }

    #[test]
    fn shuffles_differ() {
        let mut deck = Deck::standard();
        let mut rng = seeded(10);
        let hands: std::collections::HashSet<Vec<TxnKind>> = (0..50)
            .map(|_| (0..23).map(|_| deck.deal(&mut rng)).collect())
            .collect();
        assert!(hands.len() > 40);
    }
}
