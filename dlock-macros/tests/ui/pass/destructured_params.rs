//! A key names what a parameter's pattern binds (issue 47; it was a compile error): tuples,
//! tuple structs, structs, references, `mut`, `ref` and `name @ pattern` bindings, and the
//! elements of an array's slice pattern.
#![deny(warnings)]

use dlock_core::{Error, distributed_lock};

pub struct Id(u64);

pub struct Cell {
    row: u32,
    col: u32,
}

#[distributed_lock(key = "cell:{x}:{y}")]
async fn pair((x, mut y): (u32, u32)) -> Result<u32, Error> {
    y += 1;
    Ok(x + y)
}

#[distributed_lock(key = "id:{id}:{whole.0}")]
async fn newtype(whole @ Id(id): &Id) -> Result<u64, Error> {
    Ok(*id + whole.0)
}

#[distributed_lock(key = "cell:{row}:{col}")]
async fn fields(Cell { row, ref col }: Cell) -> Result<u32, Error> {
    Ok(row + *col)
}

#[distributed_lock(key = "route:{first}")]
async fn route([first, ..]: [u64; 3]) -> Result<u64, Error> {
    Ok(first)
}

fn main() {
    drop(pair((1, 2)));
    drop(newtype(&Id(3)));
    drop(fields(Cell { row: 1, col: 2 }));
    drop(route([1, 2, 3]));
}
