module cmc.example/goraft

go 1.19
