//! (in progress)
pub enum Cell {}
pub struct LatencyMatrix;
