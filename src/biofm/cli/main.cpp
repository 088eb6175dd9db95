#include <cstdio>
int main() { std::puts("biofm (skeleton)"); return 0; }
