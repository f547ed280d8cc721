// Planted: not in the style of .clang-format (tests/code/format.sh must refuse it).
int   planted_badly_formatted( int a,int b ){return a+b;}
