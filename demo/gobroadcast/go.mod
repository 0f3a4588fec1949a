module gobroadcast

go 1.19
