//! (in progress)
pub struct AiterRow;
#[derive(Debug)]
pub struct TableError;
pub fn read_aiter_csv() {}
pub fn write_aiter_csv() {}
