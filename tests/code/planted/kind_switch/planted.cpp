int f(conveyor::node_kind k) {
  switch (k) {
  case node_kind::kernel: return 1;
  default: return 0;
  }
}
