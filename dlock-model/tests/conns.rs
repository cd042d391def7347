//! The transport's checked model (`dlock_model::conns`): every property holds and every
//! `sometimes` is reached (prints the states explored); each of its mutants is caught by its
//! property (cheap enough for every run; `make model-mutants` counts them too).

// A test helper fails by panicking, and prints the counts on purpose.
#![allow(clippy::panic, clippy::print_stderr)]

use dlock_model::conns::{self, ConnModel, ConnMutant};
use stateright::{Checker, Model};

#[test]
fn the_transport_model_holds_and_reaches_its_checks() {
    let checker = ConnModel::default().checker().spawn_bfs().join();
    eprintln!(
        "transport model: {} states, {} unique",
        checker.state_count(),
        checker.unique_state_count()
    );
    if let Err(why) = conns::verdict(&checker) {
        panic!("{why}");
    }
}

#[test]
fn every_transport_mutant_is_caught() {
    for mutant in ConnMutant::ALL {
        if let Err(why) = mutant.caught() {
            panic!("{why}");
        }
    }
}
